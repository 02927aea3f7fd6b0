"""One module per backend: `openai` (any OpenAI-compatible endpoint or launched server),
`llama` (in-process GGUF, the embedded default), `transformers` with `checkpoint` (an
in-process checkpoint or LoRA adapter), `sdk` with `sdk_adapters`, `trio` and `tinker`
(token-in/token-out vendor SDKs), and `replay` (recorded generations)."""

"""How a model is driven to an answer: one request (single turn) or the multi-turn code-tool loop."""

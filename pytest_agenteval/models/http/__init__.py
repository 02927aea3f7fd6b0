"""The transport of the OpenAI-protocol backend: the aiohttp `client`, `stream` (SSE),
`retry`, endpoint `health`, priority `slots`, `aimd` (`--concurrency auto`), `replies` and
`overflow` (reading what a server answered), and `probe` (blocking start-up requests)."""

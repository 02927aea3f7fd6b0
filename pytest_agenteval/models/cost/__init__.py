"""What a run costs: `prices` (USD per 1M tokens, `prices.toml`), the run's `budget`
(`--max-cost`, `--max-total-tokens`), and `batch` (OpenAI's Batch API at half the price)."""

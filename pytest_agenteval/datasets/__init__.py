"""Benchmark data in: tabular loaders (hub id, save_to_disk folder, JSONL, parquet), the hub probe,
JSONL reading."""

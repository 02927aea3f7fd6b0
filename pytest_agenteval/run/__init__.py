"""Running rollouts: one background engine per process and the per-process runtime that turns
an item's N rollouts into a scored record."""

"""What a run leaves: the results JSONL, gates, the baseline comparison, JUnit properties and
the step summary, the terminal summary."""

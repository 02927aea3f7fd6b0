"""The shipped benchmarks as pytest test packages: run one by name from any folder,
`pytest --pyargs pytest_agenteval.suites.aime25` (or `.bfcl`, `.gaia`, `.datagen`).
Each file only binds a suite object (`pytest_agenteval.tasks`) to pytest; a copy of one
in a project's own folder is that project's suite (docs/writing-suites.md)."""

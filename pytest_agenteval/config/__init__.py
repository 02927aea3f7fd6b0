"""Every option, declared once in `table` (flag, type, default, help); its ini key (the
flag's own name), argparse entry, `Settings` attribute and docs/options.md are derived:
`option` (one option), `settings` (the frozen `Settings`), `options` (pytest: register and
read), `reference` (the Markdown reference)."""

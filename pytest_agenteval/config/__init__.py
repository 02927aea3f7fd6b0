"""Every command-line option, declared once (flag, ini key, type, default, help), and the
`Settings` each process reads."""

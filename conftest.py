"""Repository-wide pytest settings. The plugin itself is registered through the
`pytest11` entry point (pip install -e .); nothing here is needed to use it."""

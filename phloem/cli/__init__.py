"""The `phloem` command line: `main` (parse and dispatch), `commands` (the one command
contract), `builtin` and one module per feature, `render` (human output)."""

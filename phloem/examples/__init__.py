"""Runnable examples; `python -m phloem.examples.run_all` is what `make run` runs."""

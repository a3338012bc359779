"""The docs as tests: every guide's examples run, links resolve, the reference is current.

`python -m tests.docs` (`make docs`) regenerates `docs/reference/` from the code."""

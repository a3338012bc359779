"""phloem's version, in one place (read by the package face, the CLI and the daemon)."""

__version__ = "0.1.0"

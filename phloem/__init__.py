"""phloem: a supervised, multi-process runtime for AI-agent workloads."""

from phloem.protocols.errors import ErrorValue, PhloemError

__all__ = ["ErrorValue", "PhloemError"]
__version__ = "0.1.0"

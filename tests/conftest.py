"""Test-wide setup: library logs at warning and above go to the current stderr."""

from __future__ import annotations

from phloem.logs import configure_logging

configure_logging("warning", "console")

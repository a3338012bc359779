"""Conformance runner for language-neutral fixture packs (plasmid-v1 layout).

Kinds run: the coding tools, output limiting, globs (`cases`), compaction and the token
estimator (`compaction`).

`python -m phloem.tools.conformance PACK_DIR [--area A] [--json]`.
"""

from phloem.tools.conformance import compaction  # noqa: F401 - registers its runners
from phloem.tools.conformance.cases import register_runner
from phloem.tools.conformance.runner import CaseResult, discover, run_case, run_pack, summary

__all__ = ["CaseResult", "discover", "register_runner", "run_case", "run_pack", "summary"]

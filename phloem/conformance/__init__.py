"""Conformance runner for language-neutral fixture packs (plasmid-v1 layout).

`python -m phloem.conformance PACK_DIR [--area A] [--json]`.
"""

from phloem.conformance.cases import register_runner
from phloem.conformance.runner import CaseResult, discover, run_case, run_pack, summary

__all__ = ["CaseResult", "discover", "register_runner", "run_case", "run_pack", "summary"]

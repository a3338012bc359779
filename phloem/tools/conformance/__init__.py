"""Conformance runner for language-neutral fixture packs (plasmid-v1 layout).

`python -m phloem.tools.conformance PACK_DIR [--area A] [--json]`.
"""

from phloem.tools.conformance.cases import register_runner
from phloem.tools.conformance.runner import CaseResult, discover, run_case, run_pack, summary

__all__ = ["CaseResult", "discover", "register_runner", "run_case", "run_pack", "summary"]

"""Evaluation: run eval sets against agents and score them (`phloem eval run`).

Formats live in `phloem.protocols` (`evalset`, `evalcriteria`, `evalreport`); here are
the criteria (`scoring`, `judge`), the accounting (`accounting`, `baseline`), the case
runner over the agents runtime (`engine`) and the `eval` service (`service`).
"""

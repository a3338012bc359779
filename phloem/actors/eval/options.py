"""Options of one eval run, each a named limit checked with `check_range`.

| option | default | range |
| --- | --- | --- |
| `concurrency` | 1 | 1 to 256 case samples running at once |
| `samples` | 1 | 1 to 100 per case; cases x samples ≤ 10,000 |
| `timeout_s` | 60 | 0.01 to 86,400: the whole run |
| `case_timeout_s` | 30 | 0.01 to 3,600: one case sample (all its turns) |
| `pass_rate_threshold` | 1.0 | 0 to 1: passed / evaluated cases for the set to pass |
| `sample_pass_rate_threshold` | 1.0 | 0 to 1: passed / successful samples for a case |
| `min_successful_samples` | samples | 1 to samples: fewer successful samples: `partial` |
"""

from __future__ import annotations

import msgspec

from phloem.protocols.errors import ErrorKind
from phloem.protocols.limits import check_range

DEFAULT_CONCURRENCY = 1
MAX_CONCURRENCY = 256
DEFAULT_SAMPLES = 1
MAX_SAMPLES = 100
MAX_TOTAL_SAMPLES = 10_000
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 86_400.0
DEFAULT_CASE_TIMEOUT_S = 30.0
MAX_CASE_TIMEOUT_S = 3_600.0
MIN_TIMEOUT_S = 0.01

_KIND = ErrorKind.EVAL_OPTIONS_INVALID


class EvalOptions(msgspec.Struct, frozen=True, omit_defaults=True):
    concurrency: int = DEFAULT_CONCURRENCY
    samples: int = DEFAULT_SAMPLES
    timeout_s: float = DEFAULT_TIMEOUT_S
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    pass_rate_threshold: float = 1.0
    sample_pass_rate_threshold: float = 1.0
    min_successful_samples: int | None = None  # None: every sample must succeed

    @property
    def min_successful(self) -> int:
        return self.samples if self.min_successful_samples is None else self.min_successful_samples


def check_options(options: EvalOptions, cases: int) -> EvalOptions:
    """`options` if every value is in range for a set of `cases` cases, else
    `eval_options_invalid` naming the option and its range."""
    check_range("concurrency", options.concurrency, 1, MAX_CONCURRENCY, kind=_KIND)
    check_range("samples", options.samples, 1, MAX_SAMPLES, kind=_KIND)
    check_range("cases x samples", cases * options.samples, 0, MAX_TOTAL_SAMPLES, kind=_KIND)
    for name, value, high in (
        ("timeout_s", options.timeout_s, MAX_TIMEOUT_S),
        ("case_timeout_s", options.case_timeout_s, MAX_CASE_TIMEOUT_S),
    ):
        check_range(name, value, MIN_TIMEOUT_S, high, kind=_KIND, integer=False)
    for name, value in (
        ("pass_rate_threshold", options.pass_rate_threshold),
        ("sample_pass_rate_threshold", options.sample_pass_rate_threshold),
    ):
        check_range(name, value, 0, 1, kind=_KIND, integer=False)
    if options.min_successful_samples is not None:
        check_range(
            "min_successful_samples", options.min_successful_samples, 1, options.samples, kind=_KIND
        )
    return options

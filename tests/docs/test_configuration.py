"""docs/configuration.md: its table names every core key of the example config, which
loads."""

from __future__ import annotations

import tomllib

from phloem.config import Config, parse_config
from tests.helpers import ROOT, doc_section

GUIDE = "docs/configuration.md"


def test_the_table_names_every_key_of_the_default_config() -> None:
    guide = doc_section(GUIDE, "Configuration")
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for section in ("daemon", "supervision", "logging"):
        for key in data[section]:
            assert key in guide, f"{section}.{key} is not documented in {GUIDE}"
    assert isinstance(parse_config((ROOT / "conf" / "phloem.toml").read_text()), Config)

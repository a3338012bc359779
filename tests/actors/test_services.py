"""`configured_services`: an extra service that cannot be loaded is named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from phloem.actors.services import configured_services
from phloem.config import Config, ServicesConfig
from phloem.protocols.errors import PhloemError

pytestmark = pytest.mark.timeout(30)


def test_an_extra_service_whose_module_raises_names_its_key_module_and_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "raising_service_mod.py").write_text("raise ValueError('bad\\nstate')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = Config(services=ServicesConfig(extra={"bad": "raising_service_mod:Service"}))
    with pytest.raises(PhloemError) as info:
        configured_services(config)
    assert info.value.kind == "config_invalid"
    assert info.value.message == (
        "services.extra.bad: cannot load service 'raising_service_mod:Service': "
        "ValueError: bad state"
    )

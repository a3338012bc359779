"""docs/telemetry.md: its example exports to a real OTLP/HTTP receiver on loopback, and the
guide documents every `[telemetry]` key of the example config."""

from __future__ import annotations

import tomllib

import pytest

from tests.actors.telemetry.receiver import Receiver
from tests.helpers import ROOT, doc_python_blocks, doc_section, run_doc_block

pytestmark = pytest.mark.timeout(60)

GUIDE = "docs/telemetry.md"


def test_the_guide_names_jaeger_the_pinned_conventions_and_every_key() -> None:
    guide = doc_section(GUIDE, "Telemetry")
    assert "docker run" in guide and "4318:4318" in guide and "1.37.0" in guide
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for key in data["telemetry"]:
        assert f"`telemetry.{key}`" in guide or f"`{key}`" in guide, key


def test_a_traced_run(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "A traced run")
    with Receiver() as rx:  # stands in for the Jaeger of the `docker run` line
        code = block.replace("http://127.0.0.1:4318", rx.endpoint)
        run_doc_block(code, f"{GUIDE}#a-traced-run")
        assert capsys.readouterr().out == "done 3\n"
        spans = {s.name: s for s in rx.spans}
    assert set(spans) == {"my-request", "invoke_agent helper", "chat scripted"}
    assert spans["invoke_agent helper"].parent_span_id == spans["my-request"].span_id
    assert spans["chat scripted"].parent_span_id == spans["invoke_agent helper"].span_id
    assert spans["my-request"].resource["service.name"] == "readme"

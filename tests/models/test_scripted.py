"""ScriptedModel: replays answers in order, raises scripted exceptions, records requests."""

from __future__ import annotations

import threading

import pytest

from phloem import ScriptedModel
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.model import Model, ModelError, StreamingModel


def ask(text: str) -> ModelRequest:
    return ModelRequest(contents=(Content.user(text),))


def test_responses_are_returned_in_order_and_requests_recorded() -> None:
    full = ModelResponse.from_parts([Part.from_function_call("f", {"a": 1}, id="x")])
    model = ScriptedModel(["hello", full])
    first, second = ask("one"), ask("two")
    assert model.generate(first).text == "hello"
    assert model.generate(second) is full
    assert model.requests == (first, second)
    assert model.remaining == 0


def test_exception_instance_raises_at_its_call_and_script_continues() -> None:
    model = ScriptedModel([RuntimeError("boom"), "after"])
    with pytest.raises(RuntimeError, match="boom"):
        model.generate(ask("x"))
    assert model.generate(ask("y")).text == "after"
    assert model.calls == 2


def test_running_past_the_script_is_a_script_exhausted_error() -> None:
    model = ScriptedModel(["only"], name="m1")
    model.generate(ask("x"))
    with pytest.raises(ModelError) as info:
        model.generate(ask("y"))
    assert info.value.kind == "script_exhausted"
    assert info.value.message == "scripted model 'm1' has no response for call 2 (script has 1)"
    assert model.calls == 2


def test_callable_entries_see_the_request() -> None:
    model = ScriptedModel([lambda req: ModelResponse.from_text(req.contents[0].text.upper())])
    assert model.generate(ask("shout")).text == "SHOUT"


def test_invalid_entries_and_exception_classes_are_rejected() -> None:
    with pytest.raises(TypeError, match=r"responses\[0\]"):
        ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"responses\[1\]"):
        ScriptedModel(["ok", ValueError])


def test_scripted_model_satisfies_the_model_protocols_and_streams_one_final_response() -> None:
    model = ScriptedModel(["streamed"])
    assert isinstance(model, Model)
    assert isinstance(model, StreamingModel)
    chunks = list(model.stream(ask("x")))
    assert [c.text for c in chunks] == ["streamed"]
    assert not chunks[0].partial


def test_concurrent_callers_each_get_a_distinct_entry() -> None:
    model = ScriptedModel([str(i) for i in range(50)])
    seen: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            text = model.generate(ask("x")).text
            with lock:
                seen.append(text)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(seen, key=int) == [str(i) for i in range(50)]

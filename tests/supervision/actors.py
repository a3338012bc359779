"""Small actors used by the supervision tests."""

from __future__ import annotations

import threading
from typing import Any

import msgspec

from phloem.supervision import Actor
from tests.supervision.conftest import Recorder


class Worker(Actor):
    """Records start/stop; crashes on 'crash'; exits normally on 'exit'."""

    def __init__(self, name: str, rec: Recorder) -> None:
        super().__init__()
        self.name = name
        self.rec = rec

    def on_start(self) -> None:
        self.rec.add(f"start:{self.name}")

    def on_stop(self) -> None:
        self.rec.add(f"stop:{self.name}")

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError(f"{self.name} crashed api_key=sk-abcdefghijklmnopqrstuv")
        if message == "exit":
            self.stop()
            return None
        return (self.name, message)


class FailingStart(Actor):
    def on_start(self) -> None:
        raise ValueError("cannot start")


class Blocker(Actor):
    """Blocks in a handler until released: for shutdown-timeout tests."""

    def __init__(self, release: threading.Event, entered: threading.Event) -> None:
        super().__init__()
        self.release = release
        self.entered = entered

    def on_receive(self, message: Any) -> Any:
        self.entered.set()
        self.release.wait(30)
        return None


class Put(msgspec.Struct, tag="put"):
    key: str
    value: int


class Get(msgspec.Struct, tag="get"):
    key: str


class Store(Actor):
    """A typed actor: raw messages are decoded against `Put | Get`."""

    message_type = Put | Get

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, int] = {}

    def on_receive(self, message: Any) -> Any:
        match message:
            case Put(key=k, value=v):
                self.data[k] = v
                return "ok"
            case Get(key=k):
                return self.data.get(k)
        raise TypeError("unexpected")


class Tiny(Actor):
    max_inbox = 2

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def on_receive(self, message: Any) -> Any:
        self.gate.wait(30)
        return message

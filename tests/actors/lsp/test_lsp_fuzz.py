"""Fuzzing what a language server sends: Content-Length frames and their JSON bodies
(10,000 generated inputs each), in process; only typed outcomes, and the client's reader
goes on."""

from __future__ import annotations

import json
import random
import socket
import threading
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from phloem.actors.lsp.client import LspClient, MessageInvalid, decode_message
from phloem.actors.lsp.settings import LspServerConfig
from phloem.protocols.errors import PhloemError
from phloem.protocols.framing import ContentLengthDecoder, content_length_frame
from phloem.supervision.channel import Channel, ChannelClosed, ChannelTimeout
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)

FUZZ_INPUTS = 10_000
URI = "file:///w/a.py"


def _body(rng: random.Random) -> bytes:
    """A message body: a valid or broken publishDiagnostics, a response, a request of the
    server's, deep nesting, a non-object, or bytes."""
    kind = rng.randrange(7)
    if kind == 0:
        diagnostic = {"range": rng.choice([{"start": {"line": 0, "character": 0},
                      "end": {"line": 0, "character": 1}}, {}, None, [1], "r"]),
                      "message": rng.choice(["m", 3, None])}  # fmt: skip
        params = rng.choice([{"uri": URI, "diagnostics": [diagnostic]}, {"uri": 5}, [], None])
        value: object = {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                         "params": params}  # fmt: skip
    elif kind == 1:
        value = {"jsonrpc": "2.0", "id": rng.choice([1, "x", None, [1]]), "result": {}}
    elif kind == 2:
        method = "window/workDoneProgress/create"
        params = rng.choice([{}, None, [1, 2]])
        value = {"jsonrpc": "2.0", "id": rng.randrange(100), "method": method, "params": params}
    elif kind == 3:
        return b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * rng.randrange(100, 5000)
    elif kind == 4:
        value = rng.choice([[], 1, "s", None, True, [{"method": "x"}]])
    elif kind == 5:
        data = json.dumps({"jsonrpc": "2.0", "method": "$/progress", "params": {"v": [1]}})
        at = rng.randrange(len(data))
        return (data[:at] + chr(rng.randrange(32, 0x3000)) + data[at + 1 :]).encode()
    else:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(30)))
    return json.dumps(value).encode()


def _stream(rng: random.Random) -> bytes:
    """One input for a fresh decoder: frames of fuzzed bodies, sometimes a broken header."""
    frames = [content_length_frame(_body(rng)) for _ in range(rng.randrange(1, 4))]
    data = b"".join(frames)
    if rng.random() < 0.2:
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    return data


def test_fuzzed_frames_decode_to_objects_or_typed_errors() -> None:
    rng = random.Random(28)
    outcomes = {"object": 0, "bad_message": 0, "bad_frame": 0, "frame_too_large": 0}
    for _ in range(FUZZ_INPUTS):
        data = _stream(rng)
        decoder = ContentLengthDecoder(1024 * 1024)
        bodies: list[bytes] = []
        try:
            for start in range(0, len(data), 17):  # in chunks, as a pipe delivers them
                bodies += decoder.feed(data[start : start + 17])
        except PhloemError as exc:
            assert exc.kind in ("bad_frame", "frame_too_large")
            outcomes[exc.kind] += 1
        for body in bodies:
            try:
                assert isinstance(decode_message(body), dict)
                outcomes["object"] += 1
            except MessageInvalid as exc:
                assert exc.kind == "bad_message"
                outcomes["bad_message"] += 1
    print(f"\n{FUZZ_INPUTS} fuzzed LSP streams: {outcomes}")
    assert outcomes["object"] and outcomes["bad_message"] and outcomes["bad_frame"]


def test_the_clients_reader_survives_fuzzed_messages_and_records_the_next_publication() -> None:
    """A real `LspClient` reader on a channel: 10,000 fuzzed bodies, then a valid
    publishDiagnostics, which is recorded (nothing it was fed stopped it)."""
    ours, theirs = socket.socketpair()
    channel, peer = Channel(ours), Channel(theirs)
    cfg = LspServerConfig(command=["x"], patterns=["*.py"], language_id="python")
    client = LspClient("fuzz", cfg, Path("/w"), lambda *a: None, lambda _id: None)
    client._channel, client._alive = channel, True
    reader = threading.Thread(
        target=client._read_loop, args=(channel, ContentLengthDecoder(1024 * 1024)), daemon=True
    )
    reader.start()
    stop = threading.Event()

    def drain() -> None:  # the answers to the server's requests
        while not stop.is_set():
            try:
                peer.recv(0.2)
            except ChannelTimeout:
                continue
            except ChannelClosed:
                return

    threading.Thread(target=drain, daemon=True).start()
    rng = random.Random(29)
    for _ in range(FUZZ_INPUTS // 100):
        peer.send(b"".join(content_length_frame(_body(rng)) for _ in range(100)))
    where = {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 1}}
    valid = {"uri": URI, "version": 9, "diagnostics": [{"message": "late", "range": where}]}
    method = "textDocument/publishDiagnostics"
    message = {"jsonrpc": "2.0", "method": method, "params": valid}
    peer.send(content_length_frame(json.dumps(message).encode()))

    def recorded() -> bool:
        found = client._published.get(URI)
        return found is not None and found[0] == 9

    wait_until(recorded, timeout=60, what="the valid publication after the fuzz")
    (diagnostic,) = client._published[URI][1]
    assert isinstance(diagnostic, lsp.Diagnostic) and diagnostic.message == "late"
    assert reader.is_alive() and client.alive
    stop.set()
    peer.close()
    reader.join(10)
    channel.close()


def test_a_body_nested_exactly_to_the_bound_decodes_one_level_more_is_refused() -> None:
    from phloem.protocols.depth import MAX_NESTING_DEPTH

    def body(depth: int) -> bytes:  # the object itself is the first level
        inner = depth - 1
        return b'{"params":' + b"[" * inner + b"]" * inner + b"}"

    assert isinstance(decode_message(body(MAX_NESTING_DEPTH)), dict)
    with pytest.raises(MessageInvalid, match=f"nested more than {MAX_NESTING_DEPTH} levels"):
        decode_message(body(MAX_NESTING_DEPTH + 1))
    with pytest.raises(MessageInvalid, match="not a JSON object but list"):
        decode_message(b"[1]")

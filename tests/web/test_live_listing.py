"""The Live page's data: `live_list` carries each session's turn and generation epochs
(text-only fields), read by the web view."""

from __future__ import annotations

import msgspec

import phloem
from phloem.actors.live.fake_server import FakeLiveServer
from phloem.actors.live.settings import LiveConfig
from phloem.config import Config
from phloem.web import views
from tests.helpers import wait_until


def test_live_list_has_the_epochs_the_web_view_shows() -> None:
    with FakeLiveServer() as server:
        config = msgspec.structs.replace(Config(), live=LiveConfig(base_url=server.url))
        with phloem.Tree.start(config) as tree, tree.client() as client:
            ref = client.live_open({"response_modalities": ["TEXT"]})
            for event in client.live_events(ref, phloem.CreditWindow(64, 1 << 20)):
                if event.kind == "ready":
                    client.live_send(ref, text="hello")
                elif event.kind == "turn_complete":
                    break
            # the epoch moves right after the session publishes turn_complete
            wait_until(lambda: client.live_list()[0]["turn_epoch"] == 1, 30, "turn epoch 1")
            (listed,) = client.live_list()
            assert listed["generation_epoch"] == 0 and "api_key" not in listed
            html = views.live([listed])
            assert '<tr data-session="1"><td>1</td>' in html and "<td>1</td><td>0</td>" in html
            client.live_close(ref)

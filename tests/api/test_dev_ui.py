"""ADK's dev UI, from the installed google-adk, against `phloem api --dev-ui` in headless
Chromium: a message to the scripted agent shows its tool call and its reply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.apiproc import APP, api_config, running_api, streamed_call, streamed_text
from tests.helpers import running_daemon, short_tmpdir
from tests.models.fake_provider import FakeProvider
from tests.web.webproc import BROWSER_TIMEOUT_MS, browser_or_skip

pytestmark = pytest.mark.timeout(600)  # generous: a browser on a loaded machine


@pytest.fixture
def browser() -> Iterator[Any]:
    manager, browser = browser_or_skip()
    try:
        yield browser
    finally:
        browser.close()
        manager.stop()


def test_adk_dev_ui_runs_a_tool_turn(browser: Any) -> None:
    tmp = short_tmpdir()
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("the answer is 42\n")
    with (
        FakeProvider() as fake,
        running_daemon(api_config(fake.base_url, tmp / "store", ws)) as daemon,
        running_api(daemon.socket, "--listen", "127.0.0.1:0", "--dev-ui") as api,
    ):
        fake.add(streamed_call("read", {"path": "notes.txt"}), streamed_text("It is ", "42."))
        root = httpx.get(api.url + "/", timeout=30, follow_redirects=False)
        assert root.status_code == 302 and root.headers["location"] == "/dev-ui/"
        context = browser.new_context()
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"{api.url}/dev-ui/?app={APP}")
        box = page.get_by_placeholder("Type a message...")
        box.fill("what do the notes say?")
        box.press("Enter")
        page.get_by_text('read("notes.txt")').wait_for()  # the tool call
        page.get_by_text("It is 42.").wait_for()  # the reply
        context.close()
        assert fake.unused == 0
    assert not any(Path(tmp).glob("*.core"))

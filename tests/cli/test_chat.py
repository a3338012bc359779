"""`phloem chat` and `phloem live chat` as a person types them: on a pseudo-terminal, the
banner, `/help`, a `/word` that is no command (a hint, the loop goes on), `/new`,
`/sessions`, `/exit`, Ctrl-D and Ctrl-C at the prompt; `--demo` answering with no key in
the environment; and a missing key refused in one line that names its variable, before
any model call or dial."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.sessions.conftest import harness_config
from tests.helpers import PY, ROOT, cli_in, running_daemon, wait_until
from tests.models.fake_provider import FakeProvider, chat_text

pytestmark = pytest.mark.timeout(120)

SCREEN_TIMEOUT_S = 60.0
"""How long the screen has to show what a step expects (a turn on a loaded machine)."""

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PHLOEM_GEMINI_API_KEY", "OPENAI_API_KEY")
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>78]")
PROMPT = "you> "
SESSION_ID = re.compile(r"session    (s-[0-9a-f-]+)")


SIZES = [(80, 24), (200, 50)]
"""The terminal sizes the loop is checked at (columns, lines)."""


def keyless_env(columns: int = 100, lines: int = 30) -> dict[str, str]:
    """The tests' environment without any API key, this checkout importable."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    size = {"COLUMNS": str(columns), "LINES": str(lines)}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm", **size}


class Terminal:
    """A command on a pseudo-terminal of its own (its controlling terminal: Ctrl-C is a
    keystroke), with everything it has shown so far as plain text."""

    def __init__(self, args: list[str], cwd: Path, size: tuple[int, int] = (100, 30)) -> None:
        columns, lines = size
        env = keyless_env(columns, lines)
        pid, fd = pty.fork()
        if pid == 0:  # the child: nothing but exec
            try:
                window = struct.pack("HHHH", lines, columns, 0, 0)
                fcntl.ioctl(0, termios.TIOCSWINSZ, window)  # the terminal's size, as a person's
                os.chdir(cwd)
                os.execve(PY, [PY, "-m", "phloem", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self._text: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.code: int | None = None
        self._prompts = 0

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            with self._lock:
                self._text.append(data.decode("utf-8", "replace"))

    def screen(self) -> str:
        with self._lock:
            raw = "".join(self._text)
        return CSI.sub("", raw).replace("\r", "")

    def expect(self, text: str, start: int = 0) -> int:
        """Wait until `text` shows after offset `start`; the offset just past it."""
        deadline = time.monotonic() + SCREEN_TIMEOUT_S
        while time.monotonic() < deadline:
            screen = self.screen()
            found = screen.find(text, start)
            if found >= 0:
                return found + len(text)
            if self.exited():
                break
            time.sleep(0.05)
        pytest.fail(f"the screen never showed {text!r}:\n{self.screen()}")

    def type(self, line: str) -> int:
        """Type `line` and Enter once the next prompt shows; the screen offset before it."""
        self.at_prompt()
        mark = len(self.screen())
        os.write(self.fd, line.encode() + b"\r")
        return mark

    def at_prompt(self) -> None:
        """Wait for the next `you> ` prompt (each is waited for once)."""
        wait_until(
            lambda: self.screen().count(PROMPT) > self._prompts or self.exited(),
            timeout=SCREEN_TIMEOUT_S,
            what=f"a prompt on:\n{self.screen()}",
        )
        self._prompts += 1

    def key(self, char: bytes) -> None:
        os.write(self.fd, char)

    def exited(self) -> bool:
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
        return self.code is not None

    def wait(self) -> int:
        wait_until(self.exited, timeout=SCREEN_TIMEOUT_S, what="the command to exit")
        self._reader.join(SCREEN_TIMEOUT_S)
        assert self.code is not None
        return self.code

    def close(self) -> None:
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            self.wait()
        os.close(self.fd)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("remember me\n")
    return root


def test_the_loop_on_a_terminal(
    fake: FakeProvider, workspace: Path, tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake.add(chat_text("Hello from the fake."), chat_text("Still here."))
    with running_daemon(harness_config(fake.base_url, tmp_path / "store")) as daemon:
        args = ["chat", "--new", "--socket", str(daemon.socket)]
        term = Terminal(args, workspace, SIZES[0])
        terminals.append(term)
        term.expect("/help lists the commands; Ctrl-D leaves")
        banner = term.screen()
        assert "agent      coder (provider fake, model fake)" in banner
        assert f"workspace  {workspace.resolve()}" in banner
        (first,) = SESSION_ID.findall(banner)
        assert f"session    {first} (new)" in banner
        term.expect("Hello from the fake.", term.type("hello"))
        mark = term.type("/help")
        end = term.expect("Ctrl-C cancels the turn under way.", mark)
        shown = term.screen()[mark:end]
        for line in (
            "/help      list these commands",
            "/new       start a new session (same agent and workspace)",
            "/sessions  list the sessions (* marks this one)",
            "/exit      leave",
            "/NAME      a prompt template of the workspace",  # a harness agent has them
            "//text     text that starts with a slash",
        ):
            assert line in shown, shown
        hint = "/nosuch is neither a chat command nor a prompt template: /help lists the commands"
        term.expect(hint, term.type("/nosuch"))
        term.expect("Still here.", term.type("still there?"))  # the loop went on

        at = term.expect("(new)", term.type("/new"))
        (second,) = SESSION_ID.findall(term.screen()[at - 60 : at])
        assert second != first
        at = term.type("/sessions")
        term.expect(f"* {second}", at)
        listing = term.screen()[at:]
        assert f"  {first}  coder" in listing and f"* {second}  coder" in listing
        term.type("/exit")
        assert term.wait() == 0
        assert "Traceback" not in term.screen()
        assert len(fake.requests) == 2  # /help, /nosuch, /new, /sessions asked no model
        listed = json.loads(cli_in(daemon, workspace, "session", "list", "--json").stdout)
        assert {s["id"] for s in listed} == {first, second}


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
def test_the_demo_on_a_terminal_with_no_key(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    term = Terminal(["chat", "--demo"], workspace, size)
    terminals.append(term)
    term.expect("/help lists the commands; Ctrl-D leaves")
    banner = term.screen()
    assert "demo: a scripted stand-in on 127.0.0.1, no key needed" in banner
    assert "agent      demo (provider demo, model demo)" in banner
    assert f"workspace  {workspace.resolve()}" in banner and SESSION_ID.search(banner)
    at = term.type("what is in here?")
    term.expect('> ls {"path":"."}', at)
    term.expect("< ls ok", at)
    term.expect("The workspace holds: notes.txt", at)
    hint = "/nosuch is not a chat command: /help lists the commands (//nosuch sends it as text)"
    term.expect(hint, term.type("/nosuch"))
    term.expect("You have asked me 2 questions in this session", term.type("and now?"))
    term.expect("* s-", term.type("/sessions"))
    term.at_prompt()
    term.key(b"\x04")  # Ctrl-D at the prompt
    assert term.wait() == 0
    assert "Traceback" not in term.screen()
    assert not (workspace / ".phloem").exists(), "a demo remembers no session"


def test_ctrl_c_at_the_prompt_exits_quietly(workspace: Path, terminals: list[Terminal]) -> None:
    term = Terminal(["chat", "--demo"], workspace)
    terminals.append(term)
    term.at_prompt()
    term.key(b"\x03")
    assert term.wait() == 0
    assert "Traceback" not in term.screen() and "KeyboardInterrupt" not in term.screen()


def _phloem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "phloem", *args],
        cwd=cwd,
        env=keyless_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_chat_demo_answers_one_turn_with_no_key(workspace: Path) -> None:
    done = _phloem("chat", "--demo", "what is in here?", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert '> ls {"path":"."}' in done.stdout
    assert "The workspace holds: notes.txt" in done.stdout
    refused = _phloem("chat", "--demo", "--session", "s-1", "hi", cwd=workspace)
    assert refused.returncode == 2 and "--demo starts its own session" in refused.stderr


def test_live_chat_demo_answers_with_no_key(tmp_path: Path) -> None:
    done = _phloem("live", "chat", "--demo", "--text", "hello", "--text", "bye", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["echo: hello", "echo: bye"]
    as_json = _phloem("live", "chat", "--demo", "--text", "hi", "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout) == {"turn": 1, "text": "echo: hi"}


def test_chat_names_the_missing_key_before_any_model_call(
    fake: FakeProvider, workspace: Path, tmp_path: Path
) -> None:
    config = harness_config(fake.base_url, tmp_path / "store").replace(
        "max_retries = 0", 'max_retries = 0\napi_key_env = "PHLOEM_TEST_UNSET_KEY"'
    )
    with running_daemon(config) as daemon:
        for stdin in (None, "hello\n"):  # one turn, and the loop
            args = ["chat", "--new"] + (["hello"] if stdin is None else [])
            done = cli_in(daemon, workspace, *args, stdin=stdin)
            assert done.returncode == 1, done.stdout + done.stderr
            assert done.stderr.splitlines() == [
                "phloem: agent 'coder' needs an API key: set PHLOEM_TEST_UNSET_KEY in the "
                "daemon's environment and restart it (api_key_env of [providers.fake]) "
                "[config_invalid]"
            ]
            assert "you> " not in done.stdout
        assert fake.requests == []
        listed = cli_in(daemon, workspace, "session", "list", "--json")
        assert json.loads(listed.stdout) == [], "the session made for it is gone"


def test_live_chat_names_the_missing_key_before_any_dial(tmp_path: Path) -> None:
    config = '[live]\napi_key_env = "PHLOEM_TEST_UNSET_LIVE_KEY"\n'  # Google's endpoint
    config += f'[sessions]\ndir = "{tmp_path / "store"}"\n'
    with running_daemon(config) as daemon:
        t0 = time.monotonic()
        done = cli_in(daemon, tmp_path, "live", "chat", "--text", "hello")
        assert done.returncode == 1
        assert done.stderr.splitlines() == [
            "phloem: the Live endpoint needs an API key: environment variable "
            "PHLOEM_TEST_UNSET_LIVE_KEY ([live] api_key_env) is not set in the daemon's "
            "environment [config_invalid]"
        ]
        assert time.monotonic() - t0 < 60  # refused, not a dial waiting for its timeout
        assert json.loads(cli_in(daemon, tmp_path, "live", "list", "--json").stdout) == []


def test_the_default_live_key_variable_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import phloem
    from phloem.config import parse_config
    from phloem.protocols.errors import PhloemError

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    config = parse_config(f'[sessions]\ndir = "{tmp_path}"\n')
    with (
        phloem.Tree.start(config) as tree,
        tree.client() as client,
        pytest.raises(PhloemError) as info,
    ):
        client.live_open({"response_modalities": ["TEXT"]})
    assert info.value.kind == "config_invalid"
    assert "environment variable GEMINI_API_KEY ([live] api_key_env)" in info.value.message


def test_a_daemon_is_not_needed_for_a_demo(tmp_path: Path) -> None:
    """`--demo` with a `--socket` where no daemon listens still answers: it uses none."""
    nowhere = str(tmp_path / "no.sock")
    done = _phloem("chat", "--demo", "hi", "--socket", nowhere, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_provider_names_its_key_variable_only_while_it_is_unset() -> None:
    from phloem.models.providers import ProviderRegistry, decode_providers

    def provider(env: str | None) -> dict[str, str]:
        base = {"protocol": "openai-responses", "model": "m"}
        return base if env is None else {**base, "api_key_env": env}

    configs = decode_providers(
        {"set": provider("K_SET"), "empty": provider("K_EMPTY"), "unset": provider("K_UNSET")}
        | {"keyless": provider(None)}
    )
    registry = ProviderRegistry(configs, {"K_SET": "sk-1", "K_EMPTY": ""})
    missing = {name: registry.describe(name)["missing_key_env"] for name in registry.names()}
    assert missing == {"empty": "K_EMPTY", "keyless": "", "set": "", "unset": "K_UNSET"}
    assert "sk-1" not in json.dumps([registry.describe(n) for n in registry.names()])


def test_session_show_says_what_the_agent_runs_on(fake: FakeProvider, tmp_path: Path) -> None:
    import phloem
    from phloem.config import parse_config

    extra = '[agents.llm.plain]\nprovider = "fake"\n'
    extra += '[agents.llm.locked]\nprovider = "locked"\n[providers.locked]\n'
    extra += 'protocol = "gemini"\nmodel = "g"\napi_key_env = "PHLOEM_TEST_UNSET_KEY"\n'
    config = parse_config(harness_config(fake.base_url, tmp_path / "store", extra))
    with phloem.Tree.start(config) as tree, tree.client() as client:
        shown = {
            agent: client.session_show(client.session_new(agent=agent, workdir=str(tmp_path)))
            for agent in ("coder", "plain", "locked")
        }
    about = {a: (d.provider, d.model, d.missing_key_env, d.templates) for a, d in shown.items()}
    assert about == {
        "coder": ("fake", "fake", "", True),
        "plain": ("fake", "fake", "", False),
        "locked": ("locked", "g", "PHLOEM_TEST_UNSET_KEY", False),
    }


@pytest.mark.parametrize(
    ("base_url", "needed"),
    [
        ("wss://generativelanguage.googleapis.com", True),
        ("wss://generativelanguage.googleapis.com:443", True),
        ("ws://127.0.0.1:8765", False),
        ("wss://live-proxy.example.com", False),
    ],
)
def test_only_googles_live_endpoint_needs_a_key(base_url: str, needed: bool) -> None:
    from phloem.actors.live.service import needs_key
    from phloem.actors.live.settings import LiveConfig

    assert needs_key(LiveConfig(base_url=base_url)) is needed

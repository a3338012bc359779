"""Import weight: `import phloem.client` and the CLI load values, not machinery.

Each case runs in a fresh interpreter that records who imported what; a case fails if a
forbidden module was loaded, naming the chain of importers that pulled it in. Forbidden:
the actor and process machinery (pykka, psutil, `phloem.supervision`), the engine and what
it stands on (`phloem.agents`, `phloem.models`, `phloem.tools`, `phloem.instructions`,
httpx, jsonschema), the composition root (`phloem.config`) and what only costs time on a
command that has no use for it (structlog, OpenTelemetry, Rich: each loads on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT, DaemonProc

pytestmark = pytest.mark.timeout(120)

FORBIDDEN = (
    "pykka",
    "psutil",
    "httpx",
    "jsonschema",
    "structlog",
    "opentelemetry",
    "rich",
    "phloem.agents",
    "phloem.models",
    "phloem.tools",
    "phloem.instructions",
    "phloem.supervision",
    "phloem.cluster",
    "phloem.config",
    "phloem.daemon",
    "phloem.tree",
)

# Runs `CASE` (the code under test) with an import hook that remembers, for each module,
# the module whose code imported it; prints {module: importer} for everything loaded.
_PROBE = textwrap.dedent(
    """
    import io, json, sys
    importers = {}

    class Recorder:
        def find_spec(self, name, path=None, target=None):
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith(
                ("importlib", "_frozen_importlib")
            ):
                frame = frame.f_back
            importers.setdefault(name, frame.f_globals.get("__name__", "?") if frame else "?")
            return None

    sys.meta_path.insert(0, Recorder())
    out, err = io.StringIO(), io.StringIO()
    exec(compile(CASE, "<case>", "exec"), {"out": out, "err": err})
    print(json.dumps({m: importers.get(m, "?") for m in sorted(sys.modules)}))
    """
)


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def loaded_by(case: str) -> dict[str, str]:
    """Every module a fresh interpreter has loaded after running `case`, with its importer."""
    probe = f"CASE = {case!r}\n{_PROBE}"
    env = {k: v for k, v in os.environ.items() if k != "PHLOEM_SOCKET"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def violations(loaded: dict[str, str]) -> list[str]:
    """The forbidden modules loaded, each as its chain of importers (the first forbidden
    module of each chain only: what pulled the family in)."""
    chains = []
    for module, importer in sorted(loaded.items()):
        if not _forbidden(module) or _forbidden(importer):
            continue
        chain = [module, importer]
        while chain[-1] in loaded and loaded[chain[-1]] not in chain:
            chain.append(loaded[chain[-1]])
        chains.append(" <- ".join(c for c in chain if c not in ("?", "__main__")))
    return chains


def assert_light(case: str) -> dict[str, str]:
    loaded = loaded_by(case)
    found = violations(loaded)
    assert not found, "loaded what it must not (module <- its importers):\n" + "\n".join(found)
    return loaded


CLIENT_CASES = {
    "import phloem.client": (
        "import phloem.client\nphloem.client.Client\nphloem.client.AsyncClient\n"
    ),
    "phloem.Client": "import phloem\nphloem.Client\nphloem.AsyncClient\nphloem.ErrorKind\n",
    "CLI parser": "from phloem.cli.main import build_parser\nbuild_parser()\n",
}


@pytest.mark.parametrize("name", sorted(CLIENT_CASES))
def test_the_client_and_the_parser_load_no_machinery(name: str) -> None:
    loaded = assert_light(CLIENT_CASES[name])
    assert "msgspec" in loaded  # the probe sees what a case loads


def test_phloem_version_loads_no_machinery() -> None:
    assert_light("from phloem.cli.main import main\nmain(['--version'], out, err)\n")


@pytest.mark.parametrize("command", ["status", "tree", "--json status", "--json tree"])
def test_status_and_tree_load_no_machinery(shared_daemon: DaemonProc, command: str) -> None:
    argv = [*command.split(), "--socket", str(shared_daemon.socket)]
    case = (
        f"from phloem.cli.main import main\nassert main({argv!r}, out, err) == 0, err.getvalue()\n"
    )
    loaded = assert_light(case)
    assert "phloem.client.socket" in loaded  # it did talk to the daemon


def test_a_face_loads_one_submodule_not_its_siblings() -> None:
    """Lazy faces: `phloem.agents.events` is light although `phloem.agents` re-exports the
    whole engine; a name from a face loads that name's module on first use."""
    loaded = loaded_by("import phloem.agents.events\n")
    assert "phloem.agents.events" in loaded
    assert "phloem.agents.runner" not in loaded
    assert "pykka" not in loaded
    loaded = loaded_by("import phloem.agents\nphloem.agents.Event\n")
    assert "phloem.agents.events" in loaded
    assert "phloem.agents.llm_agent" not in loaded


def test_the_check_reports_what_pulled_a_forbidden_module_in() -> None:
    """The failure message names the chain: a module of ours importing psutil is shown
    as `psutil <- that module <- ...`, and psutil's own imports are not listed."""
    loaded = {
        "psutil": "phloem.cli.probe",
        "psutil._common": "psutil",
        "phloem.cli.probe": "phloem.cli.main",
        "phloem.cli.main": "__main__",
        "msgspec": "phloem.cli.main",
    }
    assert violations(loaded) == ["psutil <- phloem.cli.probe <- phloem.cli.main"]


# --- a command builds only its own part of the parser -----------------------------------


def test_the_command_table_names_what_each_module_adds() -> None:
    from phloem.cli.main import FEATURE_CLI_MODULES, build_parser

    for module, names in FEATURE_CLI_MODULES.items():
        parser = build_parser([module])
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert tuple(sub.choices) == names, module


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["status"], ["phloem.cli.builtin"]),
        (["--json", "--socket", "s.sock", "tree"], ["phloem.cli.builtin"]),
        (["--socket", "tree", "model", "list"], ["phloem.cli.models"]),  # "tree": a path
        (["--config", "c.toml", "chat", "--help"], ["phloem.cli.sessions"]),
        (["--version"], []),
        (["-h", "status"], None),  # the top-level help lists every command
        (["--", "status"], None),
        (["statsu"], None),  # argparse names the commands there are
        ([], None),
        (["--json"], None),
    ],
)
def test_a_run_builds_the_parser_of_its_command_only(
    argv: list[str], modules: list[str] | None
) -> None:
    from phloem.cli.main import modules_for

    assert modules_for(argv) == modules


def test_status_imports_no_other_commands_module(shared_daemon: DaemonProc) -> None:
    argv = ["status", "--socket", str(shared_daemon.socket)]
    loaded = loaded_by(f"from phloem.cli.main import main\nassert main({argv!r}, out, err) == 0\n")
    others = {"phloem.cli.models", "phloem.cli.eval", "phloem.cli.planning", "phloem.cli.web"}
    assert not others & set(loaded)


# --- the daemon loads what its configuration uses ---------------------------------------

DAEMON_DEFERRED = ("httpx", "httpcore", "jsonschema", "yaml", "pathspec", "rich", "click")
"""What a daemon with no model provider, no schema contract, no front matter and no
ignore file never needs: each loads with its first use (httpx alone, with the rich, click
and pygments its command-line entry pulls in, was ~0.25 s of every daemon start)."""


def test_a_daemon_of_the_default_configuration_defers_the_heavy_libraries() -> None:
    case = "import phloem.daemon.server\nfrom phloem.tree import Tree\nTree.start(None).stop()\n"
    loaded = loaded_by(case)
    assert "phloem.actors.services" in loaded  # the probe saw the whole tree start
    late = [m for m in DAEMON_DEFERRED if m in loaded]
    assert not late, {m: loaded[m] for m in late}

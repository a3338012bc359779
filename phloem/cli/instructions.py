"""`phloem instructions ...`: what the coding agent would know, from the command line.

    phloem instructions show [--workdir DIR] [--touch PATH]... [--text] [--config FILE]
    phloem instructions skills [--workdir DIR] [--config FILE]
    phloem instructions templates [--workdir DIR] [--config FILE]
    phloem instructions expand "/NAME ARGS" [--workdir DIR] [--config FILE]

These run in the CLI process (no daemon needed) with the file's `[instructions]` section
(defaults without `--config`). `show` lists the active instruction documents in order
(after activating what each `--touch PATH` brings in; `--text` prints what the model
gets); `skills` and `templates` list them; `expand` prints a prompt command's expansion.
Warnings are logged to stderr as they happen. `confirm_prompt(ctx)` is the y/N question
`phloem agent run` (and `phloem chat`) asks before a mutating tool call runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError

if TYPE_CHECKING:
    from phloem.instructions.settings import InstructionsConfig
    from phloem.protocols.runs import ConfirmRequest

MAX_SHOWN_ARGS_CHARS = 64 * 1024
"""The longest arguments (as `shown_args` prints them) a y/N prompt shows; a call with
longer ones is refused without asking (it cannot be shown whole), or approved by `--yes`."""


def add_cli(commands: Commands) -> None:
    group = commands.group("instructions", "instructions, skills and templates of a workspace")
    show = group.add("show", "list the instruction documents the agent would get", _show)
    _workdir(show)
    show.add_argument(
        "--touch", metavar="PATH", action="append", default=[], help="activate as if touched"
    )
    show.add_argument("--text", action="store_true", help="print the text the model gets")
    _workdir(group.add("skills", "list the skills the agent could load", _skills))
    _workdir(group.add("templates", "list the prompt templates (/NAME)", _templates))
    expand = group.add("expand", "print the expansion of a prompt command", _expand)
    expand.add_argument("prompt", help='e.g. "/review app.py"')
    _workdir(expand)


def _workdir(parser: Any) -> None:
    parser.add_argument("--workdir", default=".", help="the workspace root (default: .)")


def _setup(ctx: CommandContext) -> tuple[InstructionsConfig, str]:
    from phloem.instructions.settings import InstructionsConfig

    workdir = Path(ctx.args.workdir)
    if not workdir.is_dir():
        raise UsageError(f"workdir is not a directory: {workdir}")
    config = InstructionsConfig()
    if getattr(ctx.args, "config", None):
        from phloem.config import load_config

        config = load_config(ctx.args.config).instructions
    return config, str(workdir)


def _show(ctx: CommandContext) -> int:
    from phloem.instructions.discovery import InstructionContext

    config, workdir = _setup(ctx)
    context = InstructionContext(workdir, config=config)
    context.touch(ctx.args.touch)
    text = context.assemble()
    docs = context.documents()
    if ctx.args.text and not ctx.json:
        ctx.out.write(text)
        return EXIT_OK
    rows = [{"path": d.shown, "scope": d.scope, "bytes": len(d.text.encode())} for d in docs]
    policy = context.policy()
    lines = [f"{r['scope']:<9} {r['bytes']:>7}  {r['path']}" for r in rows]
    if not policy.unrestricted:
        lines.append(f"tool policy: {json.dumps(policy.to_dict())}")
    ctx.emit(
        {"documents": rows, "tool_policy": policy.to_dict(), "text": text},
        text="\n".join(lines) or "(no instructions)",
    )
    return EXIT_OK


def _skills(ctx: CommandContext) -> int:
    from phloem.instructions.skills import SkillCatalog

    config, workdir = _setup(ctx)
    catalog = SkillCatalog(config, workdir)
    rows = [
        {"name": s.qualified, "description": s.description, "path": s.path}
        for s in catalog.skills()
    ]
    text = "\n".join(f"{r['name']:<32} {r['description']}" for r in rows)
    ctx.emit(rows, text=text or "(no skills)")
    return EXIT_OK


def _templates(ctx: CommandContext) -> int:
    from phloem.instructions.templates import TemplateCatalog

    config, workdir = _setup(ctx)
    catalog = TemplateCatalog(config, workdir)
    rows = [
        {"name": t.name, "description": t.description, "source": t.source, "path": t.path}
        for t in catalog.list()
    ]
    text = "\n".join(f"/{r['name']:<24} {r['source']:<12} {r['description']}" for r in rows)
    ctx.emit(rows, text=text or "(no templates)")
    return EXIT_OK


def _expand(ctx: CommandContext) -> int:
    from phloem.instructions.templates import TemplateCatalog

    config, workdir = _setup(ctx)
    catalog = TemplateCatalog(config, workdir)
    expanded = catalog.expand_prompt(ctx.args.prompt)
    ctx.emit({"prompt": ctx.args.prompt, "expanded": expanded}, text=expanded)
    return EXIT_OK


def shown_args(args: Any) -> str:
    """`args` as a confirmation prompt shows them: their JSON with every character that
    is not printable (controls, bidi overrides, zero-width and unusual spaces) written as
    a `\\u` escape, so what the terminal shows is exactly, and unambiguously, what runs."""
    text = json.dumps(args, ensure_ascii=False)
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        else:
            out.append(json.dumps(char)[1:-1])  # \\u escapes: a pair above U+FFFF
    return "".join(out)


def confirm_prompt(
    ctx: CommandContext, *, approve_all: bool = False
) -> Callable[[ConfirmRequest], bool]:
    """The answer to each `confirm` item: yes with `approve_all`; else ask y/N on the
    terminal (stderr, stdin); without a terminal to ask on, no. The question shows the
    exact arguments the tool runs with (`shown_args`), and names the secret-looking ones;
    arguments too long to show are refused unless `approve_all`."""

    def answer(request: ConfirmRequest) -> bool:
        args = shown_args(request.args)
        if len(args) > MAX_SHOWN_ARGS_CHARS:
            question = (
                f"run {request.tool} with {len(args):,} characters of arguments "
                f"(more than the {MAX_SHOWN_ARGS_CHARS:,} a prompt shows)?"
            )
            if approve_all:
                ctx.err.write(f"{question} yes (--yes)\n")
                return True
            ctx.err.write(f"{question} no (too long to show; --yes approves)\n")
            return False
        marks = f" (secret-looking: {', '.join(request.secrets)})" if request.secrets else ""
        question = f"run {request.tool} {args}{marks}?"
        if approve_all:
            ctx.err.write(f"{question} yes (--yes)\n")
            return True
        if not sys.stdin.isatty():
            ctx.err.write(f"{question} no (no terminal to ask; --yes approves)\n")
            return False
        ctx.err.write(f"{question} [y/N] ")
        ctx.err.flush()
        reply = sys.stdin.readline().strip().lower()
        return reply in ("y", "yes")

    return answer

"""`phloem model list`, `phloem model probe NAME` and `phloem ask NAME PROMPT`.

`model list` shows the running daemon's providers (asked over the socket: the
configuration in force, keys checked in the daemon's environment); with `--config FILE`,
that file's; with neither a `--config` nor a daemon, those of the file the search order
finds. Its last line (`source` in JSON) says which. `probe` and `ask` run in the CLI
process (no daemon needed): they read `[providers.NAME]` from the config file (the one
search order of `phloem.base.paths.find_config`: `--config`, `$PHLOEM_CONFIG`,
`./phloem.toml`, the user's, the system's), or take an ad-hoc provider from `--protocol
--base-url --model [--api-key-env VAR]`. Exit 0 on success, 1
with the error kind on stderr otherwise; `--json` prints the result or the error.

`add_cli(commands)` plugs them into the main `phloem` command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import msgspec

from phloem.base.paths import find_config
from phloem.cli.commands import CommandContext, Commands
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.model import PROVIDER_PROTOCOLS

if TYPE_CHECKING:
    from phloem.models.interceptors import Interceptors
    from phloem.models.oneshot import OneShotResult
    from phloem.models.providers import ProviderConfig

# The providers and the HTTP stack are imported by the commands that call a model, not
# with the parser every `phloem` command builds.

DEFAULT_ASK_MAX_OUTPUT_TOKENS = 1024
DEFAULT_ASK_MAX_TEXT_BYTES = 64 * 1024


def add_cli(commands: Commands) -> None:
    """Register `model list`, `model probe` and `ask` on the `phloem` command."""
    model = commands.group("model", "configured model providers")
    model.add("list", "list the configured providers (keys are never shown)", cmd_list)
    probe = model.add("probe", "check that a provider can make a tool call", cmd_probe)
    probe.add_argument("name", nargs="?", metavar="NAME", help="configured provider name")
    _adhoc_options(probe)
    probe.add_argument(
        "--max-output-tokens",
        type=int,
        help="default: the probe's own, `DEFAULT_PROBE_MAX_OUTPUT_TOKENS`",
    )
    ask = commands.add("ask", "one-shot prompt to a provider (no tools)", cmd_ask)
    ask.add_argument("name", nargs="?", metavar="NAME", help="configured provider name")
    ask.add_argument("prompt", metavar="PROMPT")
    _adhoc_options(ask)
    ask.add_argument("--instruction", default="", help="system instruction")
    ask.add_argument("--max-output-tokens", type=int, default=DEFAULT_ASK_MAX_OUTPUT_TOKENS)
    ask.add_argument("--max-text-bytes", type=int, default=DEFAULT_ASK_MAX_TEXT_BYTES)


def _adhoc_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ad-hoc provider (instead of NAME)")
    group.add_argument("--protocol", choices=PROVIDER_PROTOCOLS)
    group.add_argument("--base-url", metavar="URL")
    group.add_argument("--model", metavar="MODEL")
    group.add_argument("--api-key-env", metavar="VAR", help="environment variable with the key")
    group.add_argument(
        "--chat-token-limit",
        choices=("max_tokens", "max_completion_tokens"),
        help="openai-chat only (default max_completion_tokens)",
    )


def _providers(args: argparse.Namespace) -> dict[str, ProviderConfig]:
    from phloem.models.providers import load_providers

    path = find_config(getattr(args, "config", None))
    return {} if path is None else load_providers(path)


def resolve_provider(args: argparse.Namespace) -> tuple[str, ProviderConfig]:
    """The provider a command names, or the ad-hoc one its options describe."""
    from phloem.models.providers import ProviderConfig

    adhoc = args.protocol or args.model or args.base_url or args.api_key_env
    if args.name and adhoc:
        raise PhloemError(
            ErrorKind.INVALID_ARGUMENT, "give NAME or ad-hoc --protocol options, not both"
        )
    if not args.name:
        if not (args.protocol and args.model):
            raise PhloemError(
                ErrorKind.INVALID_ARGUMENT, "give a provider NAME, or --protocol and --model"
            )
        limit = args.chat_token_limit
        if args.protocol == "openai-chat" and limit is None:
            limit = "max_completion_tokens"
        try:
            config = msgspec.convert(
                {
                    "protocol": args.protocol,
                    "model": args.model,
                    "base_url": args.base_url or "",
                    "api_key_env": args.api_key_env,
                    "chat_token_limit": limit,
                },
                ProviderConfig,
            )
        except msgspec.ValidationError as exc:
            raise PhloemError(ErrorKind.CONFIG_INVALID, f"ad-hoc provider: {exc}") from None
        return "(ad-hoc)", config
    providers = _providers(args)
    if args.name not in providers:
        where = find_config(getattr(args, "config", None)) or "any config file (none found)"
        raise PhloemError(ErrorKind.UNKNOWN_PROVIDER, f"no provider named {args.name!r} in {where}")
    return args.name, providers[args.name]


def cmd_list(ctx: CommandContext) -> int:
    """The providers of the running daemon (asked over its socket: what its agents use,
    keys checked in its environment), or of the file `--config` names; with no
    `--config` and no daemon answering, of the file the search order finds. The output
    says which (`source`)."""
    from phloem.models.providers import load_providers, provider_rows

    explicit = getattr(ctx.args, "config", None)
    rows: list[dict[str, Any]] | None = None
    if not explicit:
        rows, source = _daemon_providers(ctx)
    if rows is None:
        path = find_config(explicit)
        rows = provider_rows(load_providers(path)) if path is not None else []
        why = "--config" if explicit else source
        source = f"{path or 'no config file (defaults)'} ({why})"
    lines = [
        f"{r['name']:<16} {r['protocol']:<17} {r['model']:<28} {r['base_url']}"
        f"  key: {r['api_key_env'] or '-'} ({r['api_key']})"
        for r in rows
    ]
    lines = lines or ["no providers configured"]
    ctx.emit({"providers": rows, "source": source}, text="\n".join([*lines, f"from {source}"]))
    return 0


def _daemon_providers(ctx: CommandContext) -> tuple[list[dict[str, Any]] | None, str]:
    """The running daemon's provider rows and where they came from; None (and why) when
    no daemon answers on the socket."""
    socket = ctx.socket_path()
    try:
        with ctx.client() as client:
            return client.list_providers(), f"the daemon on {socket}"
    except PhloemError as exc:
        if exc.kind != ErrorKind.NO_DAEMON:
            raise
        return None, f"no daemon on {socket}"


def _finish(ctx: CommandContext, result: OneShotResult, text: str) -> int:
    if ctx.json:
        ctx.emit(result)
    if result.error is not None:
        ctx.err.write(f"phloem: {result.error.message} [{result.error.kind}]\n")
        ctx.err.flush()
        return 1
    if not ctx.json:
        ctx.emit(None, text=text)
    return 0


def cmd_probe(ctx: CommandContext) -> int:
    from phloem.models import oneshot
    from phloem.models.providers import build_model

    name, config = resolve_provider(ctx.args)
    limit = ctx.args.max_output_tokens
    model = build_model(config)
    try:
        result = oneshot.probe(model) if limit is None else oneshot.probe(model, limit)
    finally:
        model.close()
    return _finish(ctx, result, f"{name}: tool calling works ({config.protocol} {config.model})")


def ask_plugins(args: argparse.Namespace) -> Interceptors:
    """The config's stateless `[plugins.NAME]` as a chain for `phloem ask` (a one-shot run
    in this process; stateful plugins live in a daemon's tree and are left out here)."""
    from phloem.actors.plugins.interceptor import PluginInterceptor
    from phloem.actors.plugins.service import slot_from_config
    from phloem.config import load_config
    from phloem.models.interceptors import NO_INTERCEPTORS, Interceptors

    path = find_config(getattr(args, "config", None))
    if path is None:
        return NO_INTERCEPTORS
    plugins = load_config(path).plugins
    slots = tuple(
        slot_from_config(name, entry) for name, entry in plugins.items() if not entry.stateful
    )
    return Interceptors([PluginInterceptor(slots)]) if slots else NO_INTERCEPTORS


def cmd_ask(ctx: CommandContext) -> int:
    from phloem.models import oneshot
    from phloem.models.providers import build_model

    _, config = resolve_provider(ctx.args)
    interceptors = ask_plugins(ctx.args)
    model = build_model(config)
    try:
        result = oneshot.run(
            model,
            ctx.args.instruction,
            ctx.args.prompt,
            (),
            max_output_tokens=ctx.args.max_output_tokens,
            max_returned_text_bytes=ctx.args.max_text_bytes,
            max_model_calls=1,
            max_tool_calls_per_response=1,
            interceptors=interceptors,
        )
    finally:
        model.close()
    return _finish(ctx, result, result.text)

"""`phloem web`: serve the read-only web view of a running daemon.

    phloem web [--listen HOST:PORT] [--reports DIR] [--refresh-ms N] [--socket S] [--config C]

`--listen` (else `[web] listen`) names the address; with neither the view is off and
the command says so (exit 2). A non-loopback address needs the token in the variable
`[web] token_env` (default `PHLOEM_WEB_TOKEN`). `--reports` (else `[web] reports_dir`)
is a directory of JSON eval reports to render. It runs until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError


def add_cli(commands: Commands) -> None:
    web = commands.add("web", "serve the read-only web view of the daemon", _web)
    web.add_argument("--listen", metavar="HOST:PORT", help="address (default: [web] listen)")
    web.add_argument("--reports", metavar="DIR", help="eval reports (default: [web] reports_dir)")
    web.add_argument("--refresh-ms", type=int, help="tree read period (default: [web] refresh_ms)")


def _web(ctx: CommandContext) -> int:
    import asyncio

    from phloem.config import WebConfig, load_config
    from phloem.web.serve import serve

    args = ctx.args
    cfg = load_config(args.config).web if args.config else WebConfig()
    listen = args.listen or cfg.listen
    if not listen:
        raise UsageError("the web view is off: pass --listen HOST:PORT or set [web] listen")
    if args.refresh_ms is not None:
        try:
            cfg = msgspec.convert(
                {**msgspec.to_builtins(cfg), "refresh_ms": args.refresh_ms}, WebConfig
            )
        except msgspec.ValidationError as err:
            raise UsageError(f"--refresh-ms: {err}") from None
    reports = args.reports or cfg.reports_dir
    asyncio.run(serve(ctx.socket_path(), cfg, listen, Path(reports) if reports else None, ctx.out))
    return EXIT_OK

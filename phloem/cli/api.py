"""`phloem api`: serve ADK's API server routes for a running daemon.

    phloem api [--listen HOST:PORT] [--dev-ui] [--socket S] [--config C]

`--listen` (else `[api] listen`) names the address; with neither the API is off and the
command says so (exit 2). A non-loopback address needs the token in the variable
`[api] token_env` (default `PHLOEM_API_TOKEN`). `--dev-ui` (else `[api] dev_ui`) also
serves ADK's dev UI from the installed google-adk package. Runs until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError


def add_cli(commands: Commands) -> None:
    api = commands.add("api", "serve ADK's API server routes (and dev UI) for the daemon", _api)
    api.add_argument("--listen", metavar="HOST:PORT", help="address (default: [api] listen)")
    api.add_argument(
        "--dev-ui", action="store_true", help="serve ADK's dev UI from an installed google-adk"
    )


def _api(ctx: CommandContext) -> int:
    import asyncio

    from phloem.config import ApiConfig, Config, load_config
    from phloem.web.api.serve import serve

    args = ctx.args
    config = load_config(args.config) if args.config else Config()
    cfg: ApiConfig = config.api
    listen = args.listen or cfg.listen
    if not listen:
        raise UsageError("the API is off: pass --listen HOST:PORT or set [api] listen")
    dev_ui = bool(args.dev_ui or cfg.dev_ui)
    user = config.sessions.user
    asyncio.run(serve(ctx.socket_path(), cfg, listen, user, dev_ui, ctx.out))
    return EXIT_OK

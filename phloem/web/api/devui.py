"""ADK's dev UI, served from the installed `google-adk` package (phloem never vendors
it): its static bundle (`google/adk/cli/browser/`) at `/dev-ui/`, the runtime config it
reads (backend on this server, telemetry off), and `/` sending a browser there.

The package is found without importing it (`find_spec` of `google.adk` only locates
it): phloem never imports google-adk. Without it, `--dev-ui` is refused at start.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

from phloem.protocols.errors import ErrorKind, PhloemError

DEV_UI_PATH = "/dev-ui/"
BUNDLE_PARTS = ("cli", "browser")  # the bundle's folder inside the google.adk package
DEV_UI_KEY = web.AppKey("dev_ui_dir", Path)


def find_bundle() -> Path:
    """The dev UI's folder in the installed `google-adk`; `config_invalid` without it."""
    try:
        spec = importlib.util.find_spec("google.adk")
    except (ImportError, ValueError):
        spec = None
    locations = [] if spec is None else list(spec.submodule_search_locations or ())
    for base in locations:
        bundle = Path(base).joinpath(*BUNDLE_PARTS)
        if (bundle / "index.html").is_file():
            return bundle
    raise PhloemError(
        ErrorKind.CONFIG_INVALID,
        "--dev-ui needs ADK's dev UI from the google-adk package: pip install google-adk",
    )


async def runtime_config(request: web.Request) -> web.StreamResponse:
    return web.json_response({"backendUrl": "", "telemetry": False})


async def to_dev_ui(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(DEV_UI_PATH)


async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(request.app[DEV_UI_KEY] / "index.html")


def add_dev_ui(app: web.Application) -> None:
    """Serve the bundle at `/dev-ui/` (its `index.html` for the app's own routes)."""
    bundle = find_bundle()
    app[DEV_UI_KEY] = bundle
    app.router.add_get("/dev-ui/assets/config/runtime-config.json", runtime_config)
    app.router.add_get("/", to_dev_ui)
    app.router.add_get("/dev-ui", to_dev_ui)
    app.router.add_get(DEV_UI_PATH, index)
    app.router.add_static(DEV_UI_PATH, bundle, follow_symlinks=False)

"""What runs on a Ray worker: `RemoteWorker`, one phloem call at a time.

The backend (`backend.RayBackend`) makes each worker a Ray actor of this class, with
`max_restarts=0` (phloem decides restarts, not Ray) and the config's `runtime_env`. A call
arrives as one pickle of `("call", fn, arg)` (a `call_in_child` call: the answer is
`fn(arg)`) or `("run", fn, args, kwargs)` (a plain process target). It is unpickled by
`AllowListUnpickler`, which resolves only names from the modules the daemon allows —
phloem's own, the modules of configured components, and `[cluster] modules`, sent with
each call — so nothing
a request carries is ever imported here: requests hold data, never names of code.

Each call answers one of:

    ("ok", value)                 value as plain msgpack data (what a local child sends)
    ("raised", type, message)     the callable raised (the message redacted)
    ("heap", detail)              MemoryError under the call's cap

A call with `max_memory_bytes` runs under a soft `RLIMIT_AS` of the worker's address
space at the call's start plus that cap, restored afterwards; a worker that hit its cap
is retired by the backend, never reused.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import resource
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from phloem.actors.cluster import rayapi
from phloem.protocols.secrets import redact
from phloem.supervision.childwire import MAX_PAYLOAD_BYTES

SAFE_BUILTINS = frozenset(
    {"set", "frozenset", "bytearray", "complex", "slice", "range", "list", "dict", "tuple"}
    | {"str", "bytes", "int", "float", "bool", "object"}
)
"""Names of `builtins` a call's pickle may name (data types; never eval, getattr, ...)."""
DATA_MODULES = ("collections", "datetime", "decimal", "uuid", "fractions", "enum", "pathlib")
"""Standard-library modules of plain data types a call's arguments may use."""

Answer = tuple[Any, ...]


class NotAllowed(pickle.UnpicklingError):
    """The pickle names code outside the allow-list."""


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only names of allowed modules (see the module docstring)."""

    def __init__(self, data: bytes, allowed: Iterable[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = tuple(allowed)

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            if name in SAFE_BUILTINS:
                return super().find_class(module, name)
        elif allowed(module, self._allowed):
            return super().find_class(module, name)
        raise NotAllowed(f"{module}.{name} is not allowed on a cluster worker")


def allowed(module: str, prefixes: Iterable[str]) -> bool:
    """Whether `module` is one of `prefixes` or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@contextlib.contextmanager
def address_space_cap(max_bytes: int | None) -> Iterator[None]:
    """A soft `RLIMIT_AS` of the current address space plus `max_bytes`, then the old one."""
    if max_bytes is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + max_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int:
    with open("/proc/self/statm", "rb") as f:
        pages = int(f.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


class RemoteWorker:
    """A Ray actor that runs allowed calls (see the module docstring)."""

    def ready(self) -> tuple[int, str, str]:
        """(pid, node id, node ip): the worker runs and says where."""
        ray = rayapi.ray()
        ctx = ray.get_runtime_context()
        return os.getpid(), ctx.get_node_id(), ray.util.get_node_ip_address()

    def call(self, blob: bytes, max_memory_bytes: int | None, allowed_modules: list[str]) -> Answer:
        """Run one call (see the module docstring); `allowed_modules` besides phloem."""
        try:
            job = AllowListUnpickler(blob, ("phloem", *allowed_modules)).load()
        except Exception as exc:
            return ("raised", type(exc).__name__, redact(str(exc)))
        try:
            with address_space_cap(max_memory_bytes):
                value = _run(job)
                data = msgspec.msgpack.encode(value)
        except MemoryError:
            return ("heap", "MemoryError under the call's address-space cap")
        except Exception as exc:
            return ("raised", type(exc).__name__, redact(str(exc)))
        if len(data) > MAX_PAYLOAD_BYTES:
            message = f"an answer of {len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}"
            return ("raised", "ValueError", message)
        return ("ok", msgspec.msgpack.decode(data))

    def check(self, modules: list[str]) -> dict[str, str]:
        """Import each module; `""` for one that imports, else why not (`cluster check`)."""
        import importlib

        out: dict[str, str] = {}
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as exc:
                out[name] = redact(f"{type(exc).__name__}: {exc}")[:300]
            else:
                out[name] = ""
        return out


def _run(job: Any) -> Any:
    match job:
        case ("call", fn, arg) if callable(fn):
            return fn(arg)
        case ("run", fn, args, kwargs) if callable(fn):
            fn(*args, **kwargs)
            return None
    raise TypeError("a cluster call is ('call', fn, arg) or ('run', fn, args, kwargs)")

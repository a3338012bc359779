"""Built-in services start in the order of SERVICE_MODULES, whatever the import order."""

from __future__ import annotations

import importlib

from phloem.actors import services


def test_services_start_in_declared_order_even_when_imported_out_of_order() -> None:
    for module in reversed(services.SERVICE_MODULES):
        importlib.import_module(module)
    names = [s.name for s in services.registered_services()]
    # telemetry first: it starts before and stops after the services it watches; then
    # the cluster backend, which outlives every service that starts remote children
    assert names[:5] == ["telemetry", "cluster", "echo", "planning", "agents"]

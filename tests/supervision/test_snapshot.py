"""tree_snapshot(): every supervisor and child, JSON-ready."""

from __future__ import annotations

import msgspec
import pytest

from phloem.protocols.snapshot import TreeSnapshot
from phloem.supervision import ChildSpec, Supervisor, SupervisorChild, SupervisorSpec, tree_snapshot
from tests.supervision.actors import Store

pytestmark = pytest.mark.timeout(30)


def test_snapshot_lists_nested_supervisors_and_children_and_round_trips_as_json() -> None:
    inner = SupervisorChild(SupervisorSpec("one_for_all"), [ChildSpec("s2", Store)])
    sup = Supervisor.start(
        SupervisorSpec(), [ChildSpec("s1", Store), ChildSpec("inner", inner)], name="root"
    )
    sup.terminate_child("s1")
    snap = tree_snapshot([sup])
    (root,) = snap.roots
    assert root.id == "root" and root.type == "supervisor" and root.strategy == "one_for_one"
    s1, inner_node = root.children
    assert (s1.id, s1.state, s1.handle) == ("s1", "stopped", None)
    assert inner_node.strategy == "one_for_all" and inner_node.kind == "supervisor"
    (s2,) = inner_node.children
    assert s2.type == "actor" and s2.state == "running" and s2.thread
    assert snap.actors == 1 and snap.supervisors == 2
    decoded = msgspec.json.decode(msgspec.json.encode(snap), type=TreeSnapshot)
    assert decoded == snap


def test_default_snapshot_covers_every_root_supervisor() -> None:
    a = Supervisor.start(SupervisorSpec(), [ChildSpec("x", Store)], name="a")
    b = Supervisor.start(SupervisorSpec(), [], name="b")
    ids = {r.id for r in tree_snapshot().roots}
    assert {"a", "b"} <= ids
    b.stop()
    assert "b" not in {r.id for r in tree_snapshot().roots}
    assert a.is_alive()


def test_snapshot_stops_descending_at_max_snapshot_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    from phloem.supervision import snapshot as snapshot_module

    monkeypatch.setattr(snapshot_module, "MAX_SNAPSHOT_DEPTH", 1)
    inner = SupervisorChild(SupervisorSpec(), [ChildSpec("leaf", Store)])
    sup = Supervisor.start(SupervisorSpec(), [ChildSpec("inner", inner)], name="deep")
    (root,) = tree_snapshot([sup]).roots
    (inner_node,) = root.children
    assert inner_node.id == "inner" and inner_node.children == []

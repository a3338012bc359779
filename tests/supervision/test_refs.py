"""Owner-bound refs: issue, resolve, release, ownership errors, owner death, limits."""

from __future__ import annotations

import re
import threading

import pytest

from phloem.protocols.errors import PhloemError
from phloem.protocols.refs import OwnedRef, RefKind, parse_ref
from phloem.supervision.reasons import ExitKind, ExitReason
from phloem.supervision.refs import (
    DEFAULT_MAX_REFS_PER_OWNER,
    MAX_REFS_PER_OWNER_RANGE,
    Owner,
    OwnerRegistry,
)

pytestmark = pytest.mark.timeout(20)


def _noop(reason: ExitReason) -> None:
    return None


def test_a_ref_is_ref_prefix_and_32_hex_digits_and_unique() -> None:
    reg = OwnerRegistry()
    alice = Owner.client("alice")
    refs = {str(reg.create(alice, i, _noop)) for i in range(200)}
    assert len(refs) == 200
    assert all(re.fullmatch(r"ref_[0-9a-f]{32}", r) for r in refs)


def test_the_owner_resolves_its_ref_to_the_resource() -> None:
    reg = OwnerRegistry()
    alice = Owner.connection("alice")
    ref = reg.create(alice, {"run": 1}, _noop)
    assert reg.resolve(ref, alice) == {"run": 1}
    assert reg.resolve(ref.text, alice) == {"run": 1}


def test_another_owner_gets_not_owner() -> None:
    reg = OwnerRegistry()
    alice, bob = Owner.client("alice"), Owner.client("bob")
    ref = reg.create(alice, "res", _noop)
    with pytest.raises(PhloemError) as err:
        reg.resolve(ref, bob)
    assert err.value.kind == "not_owner"
    with pytest.raises(PhloemError) as err:
        reg.release(ref, bob)
    assert err.value.kind == "not_owner"
    assert reg.resolve(ref, alice) == "res"


def test_an_unknown_well_formed_ref_is_not_owner_so_probing_reveals_nothing() -> None:
    reg = OwnerRegistry()
    alice = Owner.client()
    with pytest.raises(PhloemError) as err:
        reg.resolve("ref_" + "0" * 32, alice)
    assert err.value.kind == "not_owner"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ref_",
        "ref_" + "0" * 31,
        "ref_" + "0" * 33,
        "ref_" + "G" * 32,
        "ref_" + "A" * 32,
        "REF_" + "0" * 32,
        "xyz_" + "0" * 32,
        "ref_" + "0" * 10_000,
        "ref_" + "é" * 32,
    ],
)
def test_a_malformed_ref_is_invalid_ref(text: str) -> None:
    reg = OwnerRegistry()
    with pytest.raises(PhloemError) as err:
        reg.resolve(text, Owner.client())
    assert err.value.kind == "invalid_ref"


def test_a_non_string_ref_is_invalid_ref() -> None:
    reg = OwnerRegistry()
    with pytest.raises(PhloemError) as err:
        reg.resolve(12345, Owner.client())  # type: ignore[arg-type]
    assert err.value.kind == "invalid_ref"


def test_release_forgets_without_cancelling() -> None:
    reg = OwnerRegistry()
    alice = Owner.client()
    cancelled: list[ExitReason] = []
    ref = reg.create(alice, "res", cancelled.append)
    assert reg.release(ref, alice) == "res"
    assert reg.count(alice) == 0
    reg.owner_down(alice)
    assert cancelled == []
    with pytest.raises(PhloemError) as err:
        reg.resolve(ref, alice)
    assert err.value.kind == "not_owner"


def test_owner_down_cancels_everything_it_held_exactly_once() -> None:
    reg = OwnerRegistry()
    alice, bob = Owner.connection("alice"), Owner.connection("bob")
    cancelled: list[tuple[str, ExitReason]] = []
    for i in range(5):
        reg.create(alice, i, lambda r, i=i: cancelled.append((f"a{i}", r)))
    bob_ref = reg.create(bob, "b", lambda r: cancelled.append(("b", r)))
    assert reg.owner_down(alice) == 5
    assert sorted(name for name, _ in cancelled) == [f"a{i}" for i in range(5)]
    assert all(r.kind is ExitKind.OWNER_DOWN for _, r in cancelled)
    assert reg.owner_down(alice) == 0
    assert len(cancelled) == 5
    assert reg.resolve(bob_ref, bob) == "b"
    assert reg.count() == 1


def test_a_failing_cancel_callback_does_not_stop_the_others() -> None:
    reg = OwnerRegistry()
    alice = Owner.client()
    seen: list[int] = []

    def boom(reason: ExitReason) -> None:
        raise RuntimeError("cancel failed")

    reg.create(alice, 0, boom)
    reg.create(alice, 1, lambda r: seen.append(1))
    assert reg.owner_down(alice) == 2
    assert seen == [1]


def test_a_down_owner_cannot_create_refs() -> None:
    reg = OwnerRegistry()
    alice = Owner.client()
    reg.owner_down(alice)
    assert alice.is_down
    with pytest.raises(PhloemError) as err:
        reg.create(alice, "late", _noop)
    assert err.value.kind == "owner_down"


def test_the_ref_count_per_owner_is_bounded_at_its_limit() -> None:
    reg = OwnerRegistry(max_refs_per_owner=3)
    alice, bob = Owner.client(), Owner.client()
    refs = [reg.create(alice, i, _noop) for i in range(3)]
    with pytest.raises(PhloemError) as err:
        reg.create(alice, 3, _noop)
    assert err.value.kind == "too_many_refs"
    reg.create(bob, "other owners unaffected", _noop)
    reg.release(refs[0], alice)
    reg.create(alice, "room again", _noop)


def test_max_refs_per_owner_is_validated() -> None:
    assert OwnerRegistry().max_refs_per_owner == DEFAULT_MAX_REFS_PER_OWNER
    lo, hi = MAX_REFS_PER_OWNER_RANGE
    OwnerRegistry(lo)
    OwnerRegistry(hi)
    with pytest.raises(
        ValueError, match=r"^invalid_argument: max_refs_per_owner must be between 1 and 1000000$"
    ):
        OwnerRegistry(lo - 1)
    with pytest.raises(ValueError, match=r"^invalid_argument: max_refs_per_owner must be between"):
        OwnerRegistry(hi + 1)
    with pytest.raises(TypeError, match=r"^invalid_argument: max_refs_per_owner must be an int$"):
        OwnerRegistry(True)


def test_a_custom_ref_kind_uses_its_own_prefix_and_error_names() -> None:
    reg = OwnerRegistry(max_refs_per_owner=1)
    planning = reg.define_kind(
        RefKind(
            name="planning",
            prefix="plan_",
            invalid_error="invalid_planning_ref",
            not_owner_error="not_planning_owner",
            too_many_error="too_many_planning_runs",
        )
    )
    alice, bob = Owner.client(), Owner.client()
    ref = reg.create(alice, "run", _noop, kind="planning")
    assert ref.text.startswith("plan_") and ref.kind == "planning"
    assert reg.resolve(ref, alice, kind="planning") == "run"
    cases = [
        (lambda: reg.resolve(ref, bob, kind="planning"), "not_planning_owner"),
        (lambda: reg.resolve("plan_nothex", alice, kind="planning"), "invalid_planning_ref"),
        (lambda: reg.resolve("ref_" + "0" * 32, alice, kind="planning"), "invalid_planning_ref"),
        (lambda: reg.resolve(ref.text, alice), "invalid_ref"),  # wrong kind for the prefix
        (lambda: reg.create(alice, "second", _noop, kind="planning"), "too_many_planning_runs"),
    ]
    for call, kind in cases:
        with pytest.raises(PhloemError) as err:
            call()
        assert err.value.kind == kind
    assert parse_ref(ref.text, planning) == OwnedRef(ref.text, "planning")


def test_defining_a_kind_twice_differently_or_reusing_a_prefix_is_refused() -> None:
    reg = OwnerRegistry()
    reg.define_kind(RefKind(name="a", prefix="a_"))
    reg.define_kind(RefKind(name="a", prefix="a_"))
    with pytest.raises(ValueError, match="already defined differently"):
        reg.define_kind(RefKind(name="a", prefix="b_"))
    with pytest.raises(ValueError, match="already used"):
        reg.define_kind(RefKind(name="c", prefix="a_"))
    with pytest.raises(ValueError, match="unknown ref kind"):
        reg.create(Owner.client(), 1, _noop, kind="nope")
    with pytest.raises(ValueError, match=r"^prefix must match"):
        RefKind(name="d", prefix="D")


def test_discard_forgets_a_ref_whoever_holds_it() -> None:
    reg = OwnerRegistry()
    alice = Owner.client()
    ref = reg.create(alice, "done", _noop)
    assert reg.discard(ref)
    assert not reg.discard(ref)
    assert reg.refs_of(alice) == []


def test_concurrent_creates_and_owner_downs_lose_nothing() -> None:
    reg = OwnerRegistry()
    owners = [Owner.connection(f"c{i}") for i in range(8)]
    cancelled = [0] * len(owners)
    lock = threading.Lock()
    barrier = threading.Barrier(len(owners))

    def work(i: int) -> None:
        barrier.wait()

        def cancel(reason: ExitReason) -> None:
            with lock:
                cancelled[i] += 1

        for n in range(300):
            ref = reg.create(owners[i], n, cancel)
            assert reg.resolve(ref, owners[i]) == n
            if n % 3 == 0:
                reg.release(ref, owners[i])
        assert reg.owner_down(owners[i]) == 200

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(owners))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert cancelled == [200] * len(owners)
    assert reg.count() == 0

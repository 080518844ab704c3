"""Checks of the ID rules: session ids are opaque, injective and confined to the store."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from hypothesis import strategies as st

from ...spec import Capability, Checkpointer, SessionEvent, UserPrompt
from ..engines.contract.outcomes import Err, run_backend
from ..engines.contract.violations import RuleViolation
from ..engines.machines.strategies import session_ids
from ..engines.run.harness import Harness, read_all
from ..engines.search.properties import run_property
from ._id_probes import ID_PROBES
from ._support import expect
from .base import check

__all__ = ["CHECKS"]


@check("ID-001", "LIST-001", kind="property")
def ids_round_trip_exactly(h: Harness) -> None:
    """ID-001: any valid ids are listed and read back exactly as given."""

    async def body(cp: Checkpointer, ids: list[str]) -> None:
        for n, sid in enumerate(ids):
            await cp.append(sid, [h.prompt(f"event {n}")])
        if h.has(Capability.LIST):
            listed = sorted(info.id for info in await cp.list_sessions())
            expect(
                listed == sorted(ids), "ID-001", f"appended to {sorted(ids)!r}; listed {listed!r}"
            )
        for n, sid in enumerate(ids):
            stored = await read_all(cp, sid)
            expect(
                [s.event for s in stored] == [h.prompt(f"event {n}")]
                and stored[0].session_id == sid,
                "ID-001",
                f"session {sid!r} read back {stored!r}",
            )

    run_property(h, st.lists(session_ids(), min_size=1, max_size=4, unique=True), body)


@check("ID-002")
async def confusable_ids_never_share_storage(h: Harness) -> None:
    """ID-002: ids a store's separators, escapes, case, normalisation or length limit could merge stay apart."""
    # Every probe gets one event of its own, then every log is read back: a log holding
    # another probe's event names the two ids that share storage. A probe the store
    # refuses is an id the contract allows refused (ID-001), not a collision.
    cp = await h.open()
    owners: dict[UserPrompt, str] = {}
    for n, sid in enumerate(ID_PROBES):
        event = h.prompt(f"only in probe {n}")
        appended = await run_backend(partial(cp.append, sid, [event]))
        if isinstance(appended, Err):
            h.record(_refused(sid, f"append({sid!r}, [{event!r}])", appended.error))
        else:
            owners[event] = sid
    for event, sid in owners.items():
        read = await run_backend(partial(read_all, cp, sid))
        if isinstance(read, Err):
            h.record(_refused(sid, f"read({sid!r})", read.error))
            continue
        got = [stored.event for stored in read.value]
        if got != [event]:
            h.record(_shared(sid, event, got, owners))
            break
    if h.has(Capability.DELETE) and not h.findings:
        await cp.delete("a/b")
        for sid in owners.values():
            if sid != "a/b":
                head = await cp.head(sid)
                expect(head == 1, "ID-002", f"deleting 'a/b' changed {sid!r}: its head is {head}")


def _refused(sid: str, call: str, error: BaseException) -> RuleViolation:
    got = f"{type(error).__name__}: {error}"
    return RuleViolation(
        "ID-001",
        f"{call} raised {got}; the contract allows this session id{_size(sid)}",
        call=call,
        expected="the id is stored and read back like any other",
        got=got,
    )


def _shared(
    sid: str, event: UserPrompt, got: list[SessionEvent], owners: dict[UserPrompt, str]
) -> RuleViolation:
    others = [owners[e] for e in got if isinstance(e, UserPrompt) and owners.get(e, sid) != sid]
    call = f"read({sid!r})"
    expected = f"only its own event {event!r}"
    if others:
        message = (
            f"session ids {_named(sid)} and {_named(others[0])} share storage: "
            f"{call} returned the event appended to {others[0]!r}"
        )
    else:
        message = (
            f"session {_named(sid)} was given one event of its own; {call} returned {got[:3]!r}"
        )
    return RuleViolation("ID-002", message, call=call, expected=expected, got=repr(got[:3]))


def _named(sid: str) -> str:
    """The id as given, with its length when that is more than a person counts at a glance."""
    return f"{sid!r}{_size(sid)}"


def _size(sid: str) -> str:
    return f" ({len(sid)} characters, {len(sid.encode())} bytes)" if len(sid) > 16 else ""


def _tree(path: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), path))
    return found


@check("ID-003")
async def ids_cannot_escape_the_store(h: Harness) -> None:
    """ID-003: ids like '../x' and absolute paths create nothing outside the store's path."""
    # The store sits two levels down in a directory of this check's own, and every
    # escape lands there (the absolute path too): what appears beside the store is
    # the evidence, and nothing outside the check's directory is touched or consulted.
    outer = h.new_store()
    store = outer / "inner" / "store"
    store.mkdir(parents=True)
    escape_ids = [
        "../escaped",
        "../../escaped",
        str(outer / "escaped-absolute"),
        "..",
        ".",
        "sub/../../escaped",
        "~",
        "\\..\\escaped",
    ]
    before = _tree(outer) - _tree_prefixed(store, outer)
    cp = await h.open(store)
    for sid in escape_ids:
        await cp.append(sid, [h.prompt(sid)])
    for sid in escape_ids:
        events = [s.event for s in await read_all(cp, sid)]
        # Another probe's event in this session is a collision of two ids (ID-002), not
        # an escape: the files beside the store, checked below, are the escape's evidence.
        shared = [other for other in escape_ids if other != sid and h.prompt(other) in events]
        expect(
            not shared,
            "ID-002",
            f"session ids {sid!r} and {shared[0] if shared else ''!r} share storage: "
            f"read({sid!r}) returned {shared[0] if shared else ''!r}'s event",
        )
        expect(events == [h.prompt(sid)], "ID-003", f"session {sid!r} did not read back")
    if h.has(Capability.DELETE):
        for sid in escape_ids:
            await cp.delete(sid)
    await cp.close()
    after = _tree(outer) - _tree_prefixed(store, outer)
    expect(after == before, "ID-003", f"files appeared beside the store: {sorted(after - before)}")


def _tree_prefixed(store: Path, outer: Path) -> set[str]:
    rel = os.path.relpath(store, outer)
    return {rel} | {os.path.join(rel, p) for p in _tree(store)}


CHECKS = (
    ids_round_trip_exactly,
    confusable_ids_never_share_storage,
    ids_cannot_escape_the_store,
)

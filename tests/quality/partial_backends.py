"""Backends that leave out an optional operation, honestly or not, and one that escapes its store.

Each is the in-memory reference backend (`MemoryCheckpointer`) with one change;
the kit loads them by ``module:function`` through the ``make_*`` factories.
``WithoutDelete``, ``WithoutList`` and ``WithoutMaintenance`` are correct
backends: they do not declare the capability and refuse the operation with
`UnsupportedOperationError`, as CAP-001 asks. The others are wrong on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path

from checkpointspec.backends.memory import MemoryCheckpointer, MemoryStore, store_for
from checkpointspec.spec import (
    BackendContext,
    Capability,
    SessionEvent,
    SessionInfo,
    UnsupportedOperationError,
    check_session_id,
)

__all__ = [
    "make_delete_declared_but_refused",
    "make_delete_undeclared_but_silent",
    "make_escapes_the_store",
    "make_maintenance_undeclared_but_granted",
    "make_not_implemented_delete",
    "make_without_delete",
    "make_without_list",
    "make_without_maintenance",
]


class WithoutDelete(MemoryCheckpointer):
    """Correct: no DELETE declared, and delete refuses loudly."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.DELETE}

    async def delete(self, session_id: str) -> None:
        raise UnsupportedOperationError("delete", Capability.DELETE.value)


class WithoutList(MemoryCheckpointer):
    """Correct: no LIST declared, and list_sessions refuses loudly."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.LIST}

    async def list_sessions(self) -> list[SessionInfo]:
        raise UnsupportedOperationError("list_sessions", Capability.LIST.value)


class WithoutMaintenance(MemoryCheckpointer):
    """Correct: no MAINTENANCE declared, and acquire_maintenance refuses loudly (the reference's own refusal)."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.MAINTENANCE}


class MaintenanceUndeclaredButGranted(MemoryCheckpointer):
    """Breaks CAP-001: no MAINTENANCE declared, yet acquire_maintenance takes the lock."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.MAINTENANCE}

    async def acquire_maintenance(self, session_id: str) -> None:
        self._take(self._open("acquire_maintenance"), check_session_id(session_id))


class NotImplementedDelete(MemoryCheckpointer):
    """Breaks CAP-001: no DELETE declared, but delete refuses with NotImplementedError."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.DELETE}

    async def delete(self, session_id: str) -> None:
        raise NotImplementedError("delete")


class DeleteUndeclaredButSilent(MemoryCheckpointer):
    """Breaks CAP-001: no DELETE declared, and delete silently does nothing."""

    capabilities = MemoryCheckpointer.capabilities - {Capability.DELETE}

    async def delete(self, session_id: str) -> None:
        return None


class DeleteDeclaredButRefused(MemoryCheckpointer):
    """Breaks DELETE-001: DELETE declared, yet delete refuses."""

    async def delete(self, session_id: str) -> None:
        raise UnsupportedOperationError("delete", Capability.DELETE.value)


class EscapesTheStore(MemoryCheckpointer):
    """Breaks ID-003: also writes every session to ``<store>/<session id>/events.log``,
    joining the id onto the store's path as it is, so '..' and absolute ids escape."""

    def __init__(self, store: MemoryStore, root: Path) -> None:
        super().__init__(store)
        self._root = root

    async def append(
        self,
        session_id: str,
        events: list[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        head = await super().append(
            session_id, events, expected_head, expected_generation=expected_generation
        )
        _leave_a_trace(os.path.join(self._root, session_id, "events.log"), head)
        return head


def _leave_a_trace(target: str, head: int) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "a", encoding="utf-8") as log:
        log.write(f"{head}\n")


def make_without_delete(ctx: BackendContext) -> MemoryCheckpointer:
    return WithoutDelete(store_for(ctx.path))


def make_without_list(ctx: BackendContext) -> MemoryCheckpointer:
    return WithoutList(store_for(ctx.path))


def make_without_maintenance(ctx: BackendContext) -> MemoryCheckpointer:
    return WithoutMaintenance(store_for(ctx.path))


def make_maintenance_undeclared_but_granted(ctx: BackendContext) -> MemoryCheckpointer:
    return MaintenanceUndeclaredButGranted(store_for(ctx.path))


def make_not_implemented_delete(ctx: BackendContext) -> MemoryCheckpointer:
    return NotImplementedDelete(store_for(ctx.path))


def make_delete_undeclared_but_silent(ctx: BackendContext) -> MemoryCheckpointer:
    return DeleteUndeclaredButSilent(store_for(ctx.path))


def make_delete_declared_but_refused(ctx: BackendContext) -> MemoryCheckpointer:
    return DeleteDeclaredButRefused(store_for(ctx.path))


def make_escapes_the_store(ctx: BackendContext) -> MemoryCheckpointer:
    return EscapesTheStore(store_for(ctx.path), Path(ctx.path))

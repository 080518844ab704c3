"""The `Checkpointer` protocol: the storage contract every backend implements.

The names and signatures here are the contract; `checkpointspec.spec.rules` says
what each operation must do, and `checkpointspec.spec.model.SpecModel` computes
the right answer for any sequence of calls.

Errors, in the order a backend checks for them:
1. `CheckpointerClosedError` if the handle was closed (CLOSE-001);
2. `UnsupportedOperationError` if the operation needs an undeclared capability (CAP-001);
3. `InvalidArgumentError` for arguments outside the contract (ARG-*), checked
   before the store is touched;
4. `CheckpointConflictError` when ``expected_head`` / ``expected_generation``
   does not match (APPEND-002, TRUNC-003, GEN-002);
5. `InvalidArgumentError` for a ``to_seq`` beyond the current head (TRUNC-002).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from .capabilities import Capability
from .events import SessionEvent
from .records import IntegrityReport, SessionInfo, StoredEvent

if TYPE_CHECKING:  # for annotations only: context.py imports this module
    from .context import BackendContext

__all__ = [
    "Checkpointer",
    "DropsStores",
    "ExternalStorage",
    "FaultHook",
    "FaultInjectable",
    "GenerationalCheckpointer",
    "MaintenanceLockable",
    "RefusesBeforeTheBackend",
    "StoreHooks",
    "drops_stores",
]


@runtime_checkable
class Checkpointer(Protocol):
    """An append-only, per-session event log. All operations are async."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend supports beyond the core contract."""
        ...

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
    ) -> int:
        """Append ``events`` atomically and return the new head.

        The first event of a session gets seq 1. With ``expected_head`` the append
        happens only if the head still equals it; otherwise
        `CheckpointConflictError` and nothing is written. An empty batch writes
        nothing and returns the current head.
        """
        ...

    def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        """Yield the events with ``seq > since_seq`` in order, as one consistent snapshot.

        Unknown sessions yield nothing. Errors are raised no later than the first
        step of the iteration.
        """
        ...

    async def head(self, session_id: str) -> int:
        """The seq of the session's last event; 0 if it has none or is unknown."""
        ...

    async def list_sessions(self) -> list[SessionInfo]:
        """Every existing session, most recently modified first; ties by id ascending."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove a session and all its events. Deleting an unknown session does nothing."""
        ...

    async def truncate(self, session_id: str, to_seq: int, expected_head: int | None = None) -> int:
        """Keep events ``1..to_seq`` and return ``to_seq`` (needs TRUNCATE).

        ``to_seq`` beyond the head is `InvalidArgumentError`; a stale
        ``expected_head`` is `CheckpointConflictError`. A crash leaves the old or
        the new log, never a mix. Truncating an unknown session creates nothing.
        """
        ...

    async def check_integrity(self) -> IntegrityReport:
        """Inspect the whole store and report what is wrong, without changing it."""
        ...

    async def close(self) -> None:
        """Release the handle. Idempotent; every later operation raises CheckpointerClosedError."""
        ...


@runtime_checkable
class GenerationalCheckpointer(Checkpointer, Protocol):
    """A checkpointer that declares GENERATION and so can detect the ABA hazard.

    ``expected_head`` alone cannot tell a writer that the log was truncated and
    re-appended to the same head in the meantime (see TRUNC-006). The generation
    of a session id starts at 0, grows by 1 on every truncate that removes events
    and on every delete of an existing session, and never goes back — not even after
    delete and re-append. A writer that also passes ``expected_generation`` is
    refused with a `CheckpointConflictError` whose ``kind`` is ``"generation"``.
    """

    async def generation(self, session_id: str) -> int:
        """The session id's current generation (0 if never truncated or deleted)."""
        ...

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """`Checkpointer.append`, also refused when the generation moved on."""
        ...

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        """`Checkpointer.truncate`, also refused when the generation moved on."""
        ...


@runtime_checkable
class MaintenanceLockable(Checkpointer, Protocol):
    """A checkpointer that declares MAINTENANCE: one handle can hold a session alone.

    Restore and compaction rewrite a session from what they read; a writer that
    appends meanwhile would be lost under the truncate or left out of the
    summary. While a handle holds a session's maintenance lock:

    - append, truncate and delete of that session through any *other* handle,
      in this process or another, raise `SessionLockedError` and write nothing
      (MAINT-001), without waiting for the lock;
    - the holding handle writes as usual, every handle reads as usual, and
      other sessions are not affected (MAINT-002);
    - `acquire_maintenance` through any handle, the holder's included, raises
      `SessionLockedError`: the lock is not reentrant (MAINT-003).

    `release_maintenance` and `close` give the lock back; so does the death of
    the holder's process, for backends that declare MULTI_PROCESS (MAINT-004):
    a lock is tied to the process (e.g. an flock), never to a pid in a table
    that outlives it.
    """

    async def acquire_maintenance(self, session_id: str) -> None:
        """Hold ``session_id``: from now on only this handle may write to it.

        The session need not exist. Raises `SessionLockedError` when any handle,
        this one included, already holds it.
        """
        ...

    async def release_maintenance(self, session_id: str) -> None:
        """Give the session back to every writer. Does nothing when this handle does not hold it."""
        ...


@runtime_checkable
class StoreHooks(Protocol):
    """Optional methods that let the kit change a store out-of-band.

    A backend that implements them (on the checkpointer class) gets SCHEMA-001 and
    INTEG-002 checked; without them those rules are skipped with this reason. The
    kit calls them only after every handle on the store is closed.
    """

    def mark_newer_schema(self, path: Path) -> None:
        """Make the closed store at ``path`` look written by a newer, incompatible format."""
        ...

    def damage_store(self, path: Path) -> str:
        """Damage stored event data of the closed store at ``path``; say what was damaged.

        The damage must be of a kind the backend promises to detect (e.g. a
        flipped byte inside a checksummed record), not a torn tail it repairs.
        """
        ...


@runtime_checkable
class ExternalStorage(Protocol):
    """Optional: a backend that keeps a store's data outside ``ctx.path`` (a database server).

    The kit makes a fresh store for every check and removes its directory
    afterwards; data kept elsewhere would outlive it. A backend implementing this
    (on the checkpointer class) is called once a check is over, on a closed
    handle, with the check's directory: every store whose path lies under it is
    finished with, every handle on it closed.
    """

    async def drop_stores(self, directory: Path) -> list[str]:
        """Remove what the stores under ``directory`` keep outside it; say what was removed."""
        ...


@runtime_checkable
class DropsStores(Protocol):
    """Optional, on a framework store's *factory* (``--langgraph``, ``--openai-session``,
    ``--adk-session-service``): the stores it makes keep their data outside their
    directories (tables or a schema on a database server).

    A framework's factory returns the framework's own object, which cannot grow a
    method of this kit's, so the factory carries it (`drops_stores` attaches one).
    The kit calls ``drop_stores`` once a check is over, every object the factory
    made for it closed, with a context whose ``path`` is the check's directory and
    whose ``options`` are the run's: every store whose directory lies under
    ``path`` is finished with. What it raises is reported as what the run left
    behind; the verdict does not change.
    """

    async def drop_stores(self, ctx: BackendContext) -> list[str]:
        """Remove what the stores under ``ctx.path`` keep elsewhere; say what was removed."""
        ...


_Factory = TypeVar("_Factory", bound=Callable[..., object])


def drops_stores(
    drop: Callable[[BackendContext], Awaitable[list[str]]],
) -> Callable[[_Factory], _Factory]:
    """Decorate a framework store's factory with how its stores are dropped (`DropsStores`)::

        async def drop_schemas(ctx: BackendContext) -> list[str]: ...

        @drops_stores(drop_schemas)
        def database_postgres(ctx: BackendContext) -> DatabaseSessionService: ...

    The factory itself is returned unchanged, ``drop`` set as its ``drop_stores``.
    """

    def attach(factory: _Factory) -> _Factory:
        factory.drop_stores = drop  # type: ignore[attr-defined]  # a function's own attribute
        return factory

    return attach


FaultHook = Callable[[str], None]
"""Called by a backend with the name of the fault point it has reached."""


@runtime_checkable
class FaultInjectable(Protocol):
    """Optional: named points inside write operations where the kit may pause or kill.

    ``fault_points`` names every point the backend reports, e.g.
    ``"append.after_begin"`` or ``"truncate.before_rename"``. After
    ``set_fault_hook(hook)`` the backend calls ``hook(name)`` each time it
    reaches one, from whatever thread does the work, and carries on when the hook
    returns; ``set_fault_hook(None)`` removes it. The kit's worker processes block
    in the hook to hold an operation at that point while other processes act, or
    are killed there (DUR-002, APPEND-003, READ-003). Without this protocol the
    kit still kills workers, at random moments.
    """

    @property
    def fault_points(self) -> tuple[str, ...]:
        """Every fault point name this backend reports."""
        ...

    def set_fault_hook(self, hook: FaultHook | None) -> None:
        """Install (or with None, remove) the hook for this handle."""
        ...


@runtime_checkable
class RefusesBeforeTheBackend(Protocol):
    """Optional, for a proxy: rules whose every checked case it refuses or answers
    itself, before the backend behind it is asked.

    The stdio client is such a proxy: JSON cannot carry a dict posing as an event
    or a lone surrogate, so it refuses them on the kit's side. A check of such a
    rule passes on the proxy's refusal, which says nothing about the backend; the
    kit reports the rule ``kit_checked``, never ``passed``. So does a rule whose
    only evidence is a request the process behind the client answers itself for a
    backend without that operation (the lite-agent bridge's ``close`` for a
    checkpointer without ``close()``: its hello's ``emulated``).
    """

    def refused_before_the_backend(self) -> dict[str, str]:
        """Rule id → why the proxy, not the backend, refuses what the kit checks of it."""
        ...

"""The capabilities a reference backend declares, derived from how its store is set up.

Every reference backend offers the whole optional contract (DELETE, LIST,
TRUNCATE, GENERATION, MAINTENANCE) and differs only in three facts about its
store, which `store_capabilities` turns into the declared set:

* whether an acknowledged write survives a power loss (DURABLE): the file
  backend in ``fsync`` mode, SQLite with ``synchronous=FULL`` or ``EXTRA``,
  PostgreSQL as deployed with ``fsync`` and ``synchronous_commit`` on;
* whether handles in other processes can open the same store (MULTI_PROCESS):
  not SQLite's ``":memory:"`` nor the memory backend;
* whether payloads are stored as bytes that pass through a codec (CODEC):
  every backend but the memory one, which keeps events as objects.

A backend decides each fact from its own settings, saying why beside the call,
and never adds or removes a capability by hand afterwards: the kit takes the
declared set at its word (capabilities are declared, never guessed).
"""

from __future__ import annotations

from ..spec import Capability

__all__ = ["store_capabilities"]

_ALWAYS = frozenset(
    {
        Capability.DELETE,
        Capability.LIST,
        Capability.TRUNCATE,
        Capability.GENERATION,
        Capability.MAINTENANCE,
    }
)


def store_capabilities(*, durable: bool, shared: bool, codec: bool = True) -> frozenset[Capability]:
    """The capabilities of a store with these properties.

    ``durable``: an acknowledged write survives a killed process *and* a power
    loss (DUR-003), not only the first. ``shared``: handles in several processes
    may open the store at once and stay correct. ``codec``: every payload is
    stored as bytes through ``BackendContext.codec`` (when one is given).
    """
    declared = set(_ALWAYS)
    if durable:
        declared.add(Capability.DURABLE)
    if shared:
        declared.add(Capability.MULTI_PROCESS)
    if codec:
        declared.add(Capability.CODEC)
    return frozenset(declared)

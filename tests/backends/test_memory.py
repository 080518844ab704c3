"""The memory backend beyond the kit: an operation whose capability is dropped refuses."""

from __future__ import annotations

import asyncio

import pytest
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.spec import Capability, UnsupportedOperationError


@pytest.mark.parametrize(
    ("capability", "operation"),
    [(Capability.DELETE, "delete"), (Capability.LIST, "list_sessions")],
)
def test_a_subclass_dropping_a_capability_refuses_its_operation(
    capability: Capability, operation: str
) -> None:
    class Without(MemoryCheckpointer):
        capabilities = MemoryCheckpointer.capabilities - {capability}

    async def call() -> None:
        cp = Without()
        args = ("s",) if operation == "delete" else ()
        try:
            await getattr(cp, operation)(*args)
        finally:
            await cp.close()

    with pytest.raises(UnsupportedOperationError) as refused:
        asyncio.run(call())
    assert refused.value.capability == capability.value

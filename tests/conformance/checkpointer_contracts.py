"""The checkpointer contract as a value, for the capabilities of the reference backends,
importable by name (``checkpointer_contracts:FILE``) as the generic engines' worker
processes import a contract."""

from checkpointspec.conformance.engines.contract.checkpointer import checkpointer_contract
from checkpointspec.spec import Capability

FILE = checkpointer_contract(
    frozenset(
        {
            Capability.DELETE,
            Capability.LIST,
            Capability.TRUNCATE,
            Capability.DURABLE,
            Capability.MULTI_PROCESS,
        }
    )
)

"""A broken session layer for the RESTORE-006 checks: restore does nothing at all.

Every crash then leaves the pre-restore state, which recover accepts; only the
check that a restore which returned left the post-restore state can catch it.
"""

from __future__ import annotations


async def restore(*args: object, **kwargs: object) -> None:
    return None


async def recover(*args: object, **kwargs: object) -> str:
    return "nothing"


class NoOp:
    """The same layer as an object, named ``restore_layer_no_op:NoOp``."""

    restore = staticmethod(restore)
    recover = staticmethod(recover)

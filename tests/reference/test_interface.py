"""The reference is a session layer: it satisfies `checkpointspec.spec.SessionLayer` at run time.

mypy checks the signatures statically (``reference/__init__.py``); here every
name is present with the right kind (function, coroutine function, async
generator, class), takes every keyword the interface passes, and makes values
of the interface's shapes. The kit loads it like any other layer, and a layer
lacking a name is refused (``tests/conformance/test_session_suite.py``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import checkpointspec.reference as reference
import pytest
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.conformance.engines.target.session_layer import load_session_layer
from checkpointspec.spec import (
    SESSION_LAYER_NAMES,
    CompactFunction,
    RecoverFunction,
    RecoveryOutcome,
    RestoreFunction,
    SessionLayer,
    SessionWorkspace,
    Summarizer,
    WorkspaceFactory,
)


def test_the_names_are_the_protocols_members() -> None:
    members = {name for name, value in vars(SessionLayer).items() if isinstance(value, property)}
    assert members == set(SESSION_LAYER_NAMES)


def test_the_reference_has_every_name() -> None:
    assert isinstance(reference, SessionLayer)
    assert set(SESSION_LAYER_NAMES) <= set(reference.__all__)


def test_each_name_is_of_its_kind() -> None:
    assert inspect.isfunction(reference.fold)
    assert not inspect.iscoroutinefunction(reference.fold)
    for name in ("list_checkpoints", "restore", "recover"):
        assert inspect.iscoroutinefunction(getattr(reference, name)), name
    assert inspect.isasyncgenfunction(reference.compact)
    assert inspect.isclass(reference.Workspace)
    assert inspect.iscoroutinefunction(reference.Workspace.open)
    assert inspect.isclass(reference.ExtractiveSummarizer)
    assert isinstance(reference.ExtractiveSummarizer(), Summarizer)
    held = reference.maintenance(MemoryCheckpointer(), "s")
    assert isinstance(held, AbstractAsyncContextManager)


@pytest.mark.parametrize(
    ("interface", "implementation"),
    [
        (RestoreFunction.__call__, reference.restore),
        (RecoverFunction.__call__, reference.recover),
        (CompactFunction.__call__, reference.compact),
        (WorkspaceFactory.__call__, reference.Workspace),
        (WorkspaceFactory.open, reference.Workspace.open),
    ],
    ids=["restore", "recover", "compact", "Workspace", "Workspace.open"],
)
def test_it_takes_every_keyword_the_interface_passes(
    interface: Callable[..., object], implementation: Callable[..., object]
) -> None:
    wanted = [
        p.name
        for p in inspect.signature(interface).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    taken = inspect.signature(implementation).parameters
    assert wanted
    assert [name for name in wanted if name not in taken] == []


def test_its_workspace_and_recovery_are_the_interfaces(tmp_path: Path) -> None:
    async def main() -> tuple[object, object]:
        cp = MemoryCheckpointer()
        workspace = await reference.Workspace.open(tmp_path, cp, "s")
        return workspace, await reference.recover(cp, "s", workspace)

    workspace, outcome = asyncio.run(main())
    assert isinstance(workspace, SessionWorkspace)
    assert outcome is RecoveryOutcome.NOTHING


def test_the_kit_loads_it_like_any_layer() -> None:
    layer = load_session_layer("checkpointspec.reference")
    assert isinstance(layer, SessionLayer)
    assert all(callable(getattr(layer, name)) for name in SESSION_LAYER_NAMES)

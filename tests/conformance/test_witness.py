"""The witness: every call through a check's handles judged against the model as it happens
(engines/target/witness.py), and only what it can know."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from checkpointspec.backends import memory
from checkpointspec.conformance.engines.target.provenance import open_checkpointer
from checkpointspec.conformance.engines.target.witness import Witness
from checkpointspec.spec import (
    BackendContext,
    Checkpointer,
    GenerationalCheckpointer,
    SessionEvent,
    SessionLockedError,
    StoredEvent,
    UserPrompt,
)


class HeadOffByOne(memory.MemoryCheckpointer):
    """head answers one less than the log's last seq once the log holds two events."""

    async def head(self, session_id: str) -> int:
        seq = await super().head(session_id)
        return seq - 1 if seq >= 2 else seq


class ClosedHandleCrashes(memory.MemoryCheckpointer):
    """A closed handle raises its driver's own error, not CheckpointerClosedError."""

    def _open(self, operation: str) -> memory.MemoryStore:
        if self._closed:
            raise TypeError("The database connection is not open")
        return super()._open(operation)


def _factory(cls: type[memory.MemoryCheckpointer]):  # type: ignore[no-untyped-def]
    def make(ctx: BackendContext) -> Checkpointer:
        handle = memory.make(ctx)
        handle.__class__ = cls
        return handle

    return make


async def _open(witness: Witness, path: Path, broken: bool = False) -> Checkpointer:
    factory = _factory(HeadOffByOne) if broken else memory.make
    return await open_checkpointer(factory, BackendContext(path=path), witness)


def _prompts(*texts: str) -> list[UserPrompt]:
    return [UserPrompt(t) for t in texts]


def test_a_correct_store_never_diverges(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await _open(witness, tmp_path)
        await cp.append("s", _prompts("a", "b"))
        await cp.append("s", _prompts("c"), expected_head=2)
        assert [e.seq async for e in cp.read("s", 1)] == [2, 3]
        assert await cp.head("s") == 3
        await cp.truncate("s", 1)
        await cp.delete("s")
        assert await cp.list_sessions() == []
        await cp.close()

    asyncio.run(calls())
    assert witness.first is None
    assert witness.every == []


def test_the_first_call_that_diverges_is_kept_with_its_rule_and_number(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await _open(witness, tmp_path, broken=True)
        await cp.append("s", _prompts("a", "b"))
        await cp.head("s")
        await cp.head("s")

    asyncio.run(calls())
    assert witness.first is not None
    assert witness.first.number == 2
    divergence = witness.first.divergence
    assert (divergence.rule, divergence.call) == ("HEAD-001", "head('s')")
    assert (divergence.expected, divergence.got) == ("returns 2", "returned 1")
    assert len(witness.every) == 1  # a store that diverged is not judged again


def test_overlapping_calls_are_not_judged(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await _open(witness, tmp_path, broken=True)
        await cp.append("s", _prompts("a", "b"))
        unfinished = cp.read("s")
        await anext(unfinished)
        await cp.head("s")  # would diverge, but a read is still running

    asyncio.run(calls())
    assert witness.every == []


def test_a_call_the_model_does_not_know_stops_all_judging(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)
    witness.lose_all("the check handed the backend to a worker")

    async def calls() -> None:
        cp = await _open(witness, tmp_path, broken=True)
        await cp.append("s", _prompts("a", "b"))
        await cp.head("s")

    asyncio.run(calls())
    assert witness.every == []
    assert witness.lost_all == "the check handed the backend to a worker"


def test_a_store_holding_data_before_it_was_opened_is_not_judged(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await open_checkpointer(
            _factory(HeadOffByOne), BackendContext(path=tmp_path), witness, fresh=False
        )
        await cp.append("s", _prompts("a", "b"))
        await cp.head("s")

    asyncio.run(calls())
    assert witness.every == []


def test_each_example_has_its_own_first_divergence(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await _open(witness, tmp_path / "one", broken=True)
        await cp.append("s", _prompts("a", "b"))
        await cp.head("s")

    asyncio.run(calls())
    assert witness.first is not None
    witness.begin_example()
    assert witness.first is None
    assert len(witness.every) == 1


def test_a_closed_handle_raising_an_error_of_its_own_is_close_001(tmp_path: Path) -> None:
    """Outside the contract's errors the witness judges nothing, except on a closed
    handle: CLOSE-001 requires CheckpointerClosedError there, so anything else is that
    rule's divergence, whichever check made the call."""
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        factory = _factory(ClosedHandleCrashes)
        cp = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        other = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        await cp.append("s", _prompts("a"))
        await cp.close()  # the other handle keeps the (not durable) store judged
        with pytest.raises(TypeError):
            await cp.append("s", _prompts("b"))
        await other.close()

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert (divergence.rule, divergence.shape) == (
        "CLOSE-001",
        "append did not raise CheckpointerClosedError",
    )
    assert divergence.got == "raised TypeError: The database connection is not open"


class LockLetsOthersWrite(memory.MemoryCheckpointer):
    """The maintenance lock is taken and released, but never shuts another handle out."""

    async def append(
        self, session_id: str, events: Sequence[SessionEvent], expected_head: int | None = None
    ) -> int:
        store = self._open("append")
        holder = store.holders.pop(session_id, None)
        try:
            return await super().append(session_id, events, expected_head)
        finally:
            if holder is not None:
                store.holders[session_id] = holder


def test_the_maintenance_lock_is_followed_not_a_reason_to_stop_judging(tmp_path: Path) -> None:
    """A write the lock refuses through another handle changes nothing, and the holder's
    writes are judged as any: a wrong head after a restore-like truncate is still seen."""
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        holder = await _open(witness, tmp_path, broken=True)
        other = await _open(witness, tmp_path, broken=True)
        await holder.append("s", _prompts("a"))
        await holder.acquire_maintenance("s")
        with pytest.raises(SessionLockedError):
            await other.append("s", _prompts("refused"))
        with pytest.raises(SessionLockedError):
            await other.acquire_maintenance("s")
        await holder.append("s", _prompts("b"))
        await holder.release_maintenance("s")
        await holder.head("s")  # the log holds a and b: head 2, answered as 1

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert (divergence.rule, divergence.call) == ("HEAD-001", "head('s')")
    assert (divergence.expected, divergence.got) == ("returns 2", "returned 1")


def test_a_write_the_lock_should_refuse_is_maint_001(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        factory = _factory(LockLetsOthersWrite)
        holder = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        other = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        await holder.acquire_maintenance("s")
        await other.append("s", _prompts("let through"))

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert (divergence.rule, divergence.got) == ("MAINT-001", "returned")


class ReadsNothing(memory.MemoryCheckpointer):
    """read yields no event at all."""

    def read(self, session_id: str, since_seq: int = 0) -> AsyncIterator[StoredEvent]:
        async def nothing() -> AsyncIterator[StoredEvent]:
            return
            yield

        return nothing()


def test_a_read_missing_the_handles_own_writes_is_not_blindness_to_others(
    tmp_path: Path,
) -> None:
    """A read that misses every event, the reading handle's own among them, is READ-001:
    HANDLE-001 is for a handle that sees its own writes and not another's."""
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        factory = _factory(ReadsNothing)
        mine = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        other = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        await mine.append("s", _prompts("mine"))
        await other.append("s", _prompts("other's"))
        assert [e async for e in mine.read("s")] == []

    asyncio.run(calls())
    assert witness.first is not None
    assert witness.first.divergence.rule == "READ-001"


class FirstDeleteSkipsAGeneration(memory.MemoryCheckpointer):
    """A session's first delete sets its generation to 2."""

    async def delete(self, session_id: str) -> None:
        store = self._open("delete")
        first = session_id not in store.generations and session_id in store.logs
        await super().delete(session_id)
        if first:
            store.generations[session_id] += 1


def test_a_wrong_generation_is_gen_001_whatever_a_delete_removed(tmp_path: Path) -> None:
    """A generation one too high after deleting one event is GEN-001: a generation counts
    removals, so the deleted event's count explains nothing (not DELETE-002)."""
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await open_checkpointer(
            _factory(FirstDeleteSkipsAGeneration), BackendContext(path=tmp_path), witness
        )
        await cp.append("s", _prompts("only"))
        await cp.delete("s")
        assert isinstance(cp, GenerationalCheckpointer)
        assert await cp.generation("s") == 2

    asyncio.run(calls())
    assert witness.first is not None
    assert witness.first.divergence.rule == "GEN-001"


def test_another_handle_reading_nothing_is_blindness_that_keeps_the_read_rule_otherwise(
    tmp_path: Path,
) -> None:
    """With nothing but another handle's read to go by, the witness infers HANDLE-001 and
    keeps READ-001 as the other explanation, for the run to decide
    (`checkpointspec.conformance.running.roots.resolved`)."""
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        factory = _factory(ReadsNothing)
        writer = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        reader = await open_checkpointer(factory, BackendContext(path=tmp_path), witness)
        await writer.append("s", _prompts("written"))
        assert [e async for e in reader.read("s")] == []

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert divergence.rule == "HANDLE-001"
    assert divergence.otherwise == ("READ-001", "read yielded nothing of a log that holds events")


class TruncateNeverCuts(memory.MemoryCheckpointer):
    """truncate answers as if it cut, and removes nothing."""

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        self._open("truncate")
        return to_seq


def test_a_head_counting_truncated_events_keeps_their_remaining_as_the_other_explanation(
    tmp_path: Path,
) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await open_checkpointer(
            _factory(TruncateNeverCuts), BackendContext(path=tmp_path), witness
        )
        await cp.append("s", _prompts("a", "b", "c"))
        await cp.truncate("s", 1)
        assert await cp.head("s") == 3

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert divergence.rule == "HEAD-001"
    assert divergence.otherwise == ("TRUNC-001", "truncated events remain")


class TruncateToHeadMovesGeneration(memory.MemoryCheckpointer):
    """A truncate to the head moves the generation, as a removal would."""

    async def truncate(
        self,
        session_id: str,
        to_seq: int,
        expected_head: int | None = None,
        *,
        expected_generation: int | None = None,
    ) -> int:
        store = self._open("truncate")
        to_the_head = to_seq == len(store.logs.get(session_id, []))
        kept = await super().truncate(
            session_id, to_seq, expected_head, expected_generation=expected_generation
        )
        if to_the_head:
            store.generations[session_id] = store.generations.get(session_id, 0) + 1
        return kept


def test_a_generation_counting_truncates_to_the_head_keeps_trunc_005_as_the_other_explanation(
    tmp_path: Path,
) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> None:
        cp = await open_checkpointer(
            _factory(TruncateToHeadMovesGeneration), BackendContext(path=tmp_path), witness
        )
        await cp.append("s", _prompts("a", "b"))
        await cp.truncate("s", 2)
        assert isinstance(cp, GenerationalCheckpointer)
        assert await cp.generation("s") == 1

    asyncio.run(calls())
    assert witness.first is not None
    divergence = witness.first.divergence
    assert divergence.rule == "GEN-001"
    assert divergence.otherwise == ("TRUNC-005", "a truncate to the head changed the session")


class ReadLogsDropTheLast(memory.MemoryCheckpointer):
    """Reads made together (`BackendHandle.read_logs`) lose each session's last event;
    a read of its own is right."""

    async def read_logs(self, session_ids: Sequence[str]) -> list[list[StoredEvent] | Exception]:
        return [[e async for e in self.read(s)][:-1] for s in session_ids]


def test_reads_made_together_are_judged_each_as_a_read(tmp_path: Path) -> None:
    witness = Witness(memory.make(BackendContext(path=tmp_path / "probe")).capabilities)

    async def calls() -> list[list[StoredEvent] | Exception]:
        cp = await open_checkpointer(
            _factory(ReadLogsDropTheLast), BackendContext(path=tmp_path), witness
        )
        await cp.append("s", _prompts("a", "b"))
        assert [e.seq async for e in cp.read("s")] == [1, 2]
        return await cp.read_logs(["unknown", "s"])  # type: ignore[attr-defined, no-any-return]

    unknown, s = asyncio.run(calls())
    assert unknown == []
    assert [e.seq for e in s] == [1]  # type: ignore[union-attr]
    assert witness.first is not None
    assert witness.first.number == 4  # append, read, then the second of the reads together
    assert witness.first.divergence.call == "read('s')"

"""The stdio proxy: a checkpointer in another process, over JSON lines.

The Python end (`checkpointspec.backends.stdio.serve`) serving the file
backend is the well-behaved child; `stdio_children.py` plays children that
break the protocol, one way each. What the kit as a whole finds through the
proxy is in tests/conformance/test_process_backend.py.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import ParamSpec

import jsonschema
import pytest
from checkpointspec.backends.stdio import (
    MalformedMessageError,
    StdioBackendError,
    StdioCheckpointer,
    StdioProtocolError,
    load_schema,
    make,
    protocol_schema,
)
from checkpointspec.backends.stdio.client import _pool, without_spares
from checkpointspec.backends.stdio.serve import error_body
from checkpointspec.backends.stdio.wire import to_exception
from checkpointspec.spec import (
    BackendContext,
    Capability,
    CheckpointConflictError,
    CheckpointerClosedError,
    CorruptStoreError,
    InvalidArgumentError,
    ReasonCode,
    SchemaVersionError,
    SessionLockedError,
    StoreBusyError,
    StoreHooks,
    UnsupportedOperationError,
    UserPrompt,
)

SERVE = [sys.executable, "-m", "checkpointspec.backends.stdio.serve"]
P = ParamSpec("P")
CHILDREN = str(Path(__file__).with_name("stdio_children.py"))
HELLO = '{"protocol":1,"capabilities":["truncate","delete","list"]}'


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert load_schema() == json.loads(json.dumps(protocol_schema())), (
        "regenerate: python -m checkpointspec.backends.stdio > backends/stdio/protocol.schema.json"
    )


def test_the_schema_is_a_valid_json_schema() -> None:
    schema = load_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)


def synchronous(test: Callable[P, Coroutine[object, object, None]]) -> Callable[P, None]:
    """Run an async test in a loop of its own (the proxy is not tied to any loop)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture
def served(tmp_path: Path) -> Iterator[StdioCheckpointer]:
    """A file backend in a child process, every message validated against the schema."""
    cp = StdioCheckpointer.start([*SERVE, "file"], tmp_path, validate=True)
    yield cp
    asyncio.run(cp.close())


@synchronous
async def test_operations_go_through_and_come_back_typed(served: StdioCheckpointer) -> None:
    assert Capability.TRUNCATE in served.capabilities
    assert Capability.CODEC not in served.capabilities  # the codec cannot cross the pipe
    assert await served.append("s", [UserPrompt("a"), UserPrompt("b")]) == 2
    assert [(e.seq, e.event) async for e in served.read("s", 1)] == [(2, UserPrompt("b"))]
    assert await served.head("s") == 2
    assert [s.id for s in await served.list_sessions()] == ["s"]
    assert await served.truncate("s", 1) == 1
    assert (await served.check_integrity()).ok
    with pytest.raises(CheckpointConflictError) as conflict:
        await served.append("s", [UserPrompt("c")], expected_head=5)
    assert (conflict.value.expected, conflict.value.actual) == (5, 1)
    await served.delete("s")
    assert await served.head("s") == 0


@synchronous
async def test_a_read_of_many_events_arrives_whole(served: StdioCheckpointer) -> None:
    batch = [UserPrompt(f"e{i}") for i in range(2500)]  # three chunks of the server's
    await served.append("s", batch)
    assert [e.event async for e in served.read("s")] == batch


@synchronous
async def test_value_errors_are_the_childs_and_keep_their_codes(served: StdioCheckpointer) -> None:
    with pytest.raises(InvalidArgumentError) as empty:
        await served.head("")
    assert (empty.value.reason_code, empty.value.rule_id) == (ReasonCode.EMPTY, "ARG-001")
    with pytest.raises(InvalidArgumentError) as negative:
        await served.read("s", -1).__anext__()
    assert negative.value.reason_code == ReasonCode.NEGATIVE


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda cp: cp.head(7), ReasonCode.WRONG_TYPE),
        (lambda cp: cp.head("bad\ud800"), ReasonCode.NOT_UTF8),
        (
            lambda cp: cp.append("s", [{"type": "user_prompt", "text": "x"}]),
            ReasonCode.NOT_AN_EVENT,
        ),
        (lambda cp: cp.append("s", [UserPrompt("\ud800")]), ReasonCode.UNSTORABLE),
        (lambda cp: cp.truncate("s", 1.0), ReasonCode.WRONG_TYPE),
        (lambda cp: cp.append("s", [], True), ReasonCode.WRONG_TYPE),
    ],
)
@synchronous
async def test_types_json_cannot_carry_are_refused_before_the_pipe(
    served: StdioCheckpointer, call: object, code: ReasonCode
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        await call(served)  # type: ignore[operator]
    assert refused.value.reason_code == code
    assert await served.head("s") == 0  # and the child is still in step


@synchronous
async def test_an_undeclared_capability_outranks_a_wrong_type(tmp_path: Path) -> None:
    cp = await asyncio.to_thread(
        StdioCheckpointer.start,
        [sys.executable, CHILDREN, '{"protocol":1,"capabilities":[]}'],
        tmp_path,
    )
    with pytest.raises(UnsupportedOperationError):
        await cp.truncate(3, 1)  # type: ignore[arg-type]
    await cp.close()


@synchronous
async def test_a_closed_handle_refuses_everything_and_close_is_idempotent(
    served: StdioCheckpointer,
) -> None:
    await served.close()
    await served.close()
    with pytest.raises(CheckpointerClosedError):
        await served.head("s")
    with pytest.raises(CheckpointerClosedError):
        await served.append(7, [])  # type: ignore[arg-type]


@synchronous
async def test_two_handles_are_two_processes_on_one_store(tmp_path: Path) -> None:
    ctx = BackendContext(tmp_path, options={"process": " ".join([*SERVE, "file"])})
    first, second = await make(ctx), await make(ctx)
    try:
        assert first._child.process.pid != second._child.process.pid
        await first.append("s", [UserPrompt("a")])
        assert await second.head("s") == 1
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize(
    "error",
    [
        InvalidArgumentError("session_id", "must not be empty", ReasonCode.EMPTY, "ARG-001"),
        InvalidArgumentError("options", "unknown"),
        CheckpointConflictError("s", 1, 2, "generation"),
        UnsupportedOperationError("truncate", "truncate"),
        CheckpointerClosedError("head"),
        CorruptStoreError(None, "record 3", "checksum"),
        SchemaVersionError(9, 2),
        StoreBusyError("append", 1.5),
        SessionLockedError("s", "append"),
    ],
)
def test_every_contract_error_crosses_the_pipe_with_its_attributes(error: Exception) -> None:
    body = error_body(error)
    jsonschema.validate(
        json.loads(json.dumps({"id": 1, "error": _encode(body)})),
        {"$ref": "#/$defs/Reply", "$defs": load_schema()["$defs"]},
    )
    back = to_exception(body, b"")
    assert type(back) is type(error)
    assert back.__reduce__() == error.__reduce__()  # type: ignore[union-attr]


def _encode(body: object) -> object:
    import msgspec

    return json.loads(msgspec.json.encode(body))


def test_an_error_outside_the_contract_is_the_backends_own() -> None:
    back = to_exception(error_body(KeyError("x")), b"")
    assert isinstance(back, StdioBackendError)
    assert back.error_type == "KeyError"


# -- children that break the protocol -------------------------------------------------


async def _start(
    tmp_path: Path, hello: str, *lines: str, validate: bool = False
) -> StdioCheckpointer:
    return await asyncio.to_thread(
        StdioCheckpointer.start,
        [sys.executable, CHILDREN, hello, *lines],
        tmp_path,
        validate=validate,
        reply_timeout=20,
    )


@pytest.mark.parametrize(
    ("hello", "said"),
    [
        ('{"protocol":2,"capabilities":[]}', "protocol version 2"),
        ('{"protocol":1,"capabilities":["codec"]}', "cannot be offered over stdio"),
        ('{"protocol":1,"capabilities":["teleport"]}', "unknown capabilities ['teleport']"),
        ('{"protocol":1}', "malformed result of hello"),
        ('raw:{"id":0,"result":{"protocol":1,"capabilities":[]},"note":1}', "malformed reply"),
        ("raw:hello there", "malformed reply"),
        ('raw:{"id":9,"result":{"protocol":1,"capabilities":[]}}', "reply for id 9"),
    ],
)
@synchronous
async def test_a_bad_hello_is_refused_naming_what_is_wrong(
    tmp_path: Path, hello: str, said: str
) -> None:
    with pytest.raises(StdioProtocolError, match=said.replace("[", r"\[").replace("]", r"\]")):
        await _start(tmp_path, hello)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"id":{id},"result":1,"error":{"type":"X"}}', "exactly one of result, error"),
        ('{"id":{id}}', "this one has none"),
        ('{"id":{id},"result":"one"}', "malformed result of head"),
        (
            '{"id":{id},"error":{"type":"CheckpointConflictError","session_id":"s"}}',
            "lacks expected, actual",
        ),
        (
            '{"id":{id},"error":{"type":"InvalidArgumentError","argument":"a","reason":"r","reason_code":"nope"}}',
            "unknown reason_code 'nope'",
        ),
        ('{"id":{id},"fault":"x"}', "fault point reported while not enabled"),
        ('{"id":{id},"events":[]}', "events in the reply to head"),
        ("exit:4", "exited (status 4) before answering; its stderr ends:\ndying"),
    ],
)
@synchronous
async def test_a_bad_reply_is_a_protocol_error_quoting_it(
    tmp_path: Path, line: str, said: str
) -> None:
    cp = await _start(tmp_path, HELLO, line)
    with pytest.raises(StdioProtocolError, match=said.replace("(", r"\(").replace(")", r"\)")):
        await cp.head("s")


@pytest.mark.parametrize(
    ("line", "received"),
    [
        ("this line is no JSON", b"this line is no JSON"),
        ('{"id":99,"result":0}', b'{"id":99,"result":0}'),
        ('{"id":1,"result":0}', b'{"id":1,"result":0}'),
        ("exit:4", None),
    ],
)
@synchronous
async def test_a_breach_carries_the_line_received_and_the_id_expected(
    tmp_path: Path, line: str, received: bytes | None
) -> None:
    cp = await _start(tmp_path, HELLO, line)
    with pytest.raises(StdioProtocolError) as breach:
        await cp.head("s")
    assert breach.value.line == received
    assert breach.value.expected_id == 2  # the first request after hello


@synchronous
async def test_a_read_whose_count_disagrees_with_its_events_is_refused(tmp_path: Path) -> None:
    event = '{"seq":1,"session_id":"s","parent_seq":null,"ts":"2026-01-01T00:00:00Z","event":{"type":"user_prompt","text":"a"}}'
    # One scripted line holding two: the events, then a result that miscounts them.
    cp = await _start(
        tmp_path,
        HELLO,
        f'{{"id":{{id}},"events":[{event}]}}\n{{"id":{{id}},"result":{{"count":2}}}}',
    )
    with pytest.raises(StdioProtocolError, match="says 2 events"):
        [e async for e in cp.read("s")]


@synchronous
async def test_an_error_type_outside_the_contract_reaches_the_kit(tmp_path: Path) -> None:
    cp = await _start(
        tmp_path, HELLO, '{"id":{id},"error":{"type":"TypeError","message":"x is undefined"}}'
    )
    with pytest.raises(StdioBackendError, match="TypeError: x is undefined"):
        await cp.head("s")
    await cp.close()


@synchronous
async def test_validation_names_the_message_direction_number_and_place(tmp_path: Path) -> None:
    event = '{"seq":1,"session_id":"s","parent_seq":null,"ts":"t","event":{"type":"user_prompt","txt":"a"}}'
    cp = await _start(tmp_path, HELLO, f'{{"id":{{id}},"events":[{event}]}}', validate=True)
    with pytest.raises(MalformedMessageError) as malformed:
        [e async for e in cp.read("s")]
    assert (malformed.value.direction, malformed.value.number) == ("reply", 2)
    assert "at /events/0/event: Additional properties are not allowed ('txt'" in str(
        malformed.value
    )


@synchronous
async def test_validation_checks_a_result_against_its_ops_schema(tmp_path: Path) -> None:
    cp = await _start(tmp_path, HELLO, '{"id":{id},"result":-3}', validate=True)
    with pytest.raises(MalformedMessageError, match="at /result: -3 is less than the minimum of 0"):
        await cp.head("s")


@synchronous
async def test_a_command_that_cannot_start_is_named(tmp_path: Path) -> None:
    with pytest.raises(StdioProtocolError, match="cannot start no-such-program-here"):
        await asyncio.to_thread(StdioCheckpointer.start, "no-such-program-here x", tmp_path)


@synchronous
async def test_a_hung_child_is_reported_not_waited_for_forever(tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.stdin.readline()"]
    with pytest.raises(StdioProtocolError, match="no reply within 1 s"):
        await asyncio.to_thread(StdioCheckpointer.start, sleeper, tmp_path, reply_timeout=1)


@synchronous
async def test_a_child_that_stops_answering_a_call_is_reported_within_its_timeout(
    tmp_path: Path,
) -> None:
    hello_then_nothing = [
        sys.executable,
        "-c",
        "import sys; sys.stdin.readline(); "
        'print(\'{"id":0,"result":{"protocol":1,"capabilities":[]}}\', flush=True); '
        "sys.stdin.readline(); sys.stdin.readline()",
    ]
    cp = await asyncio.to_thread(
        StdioCheckpointer.start, hello_then_nothing, tmp_path, reply_timeout=1
    )
    with pytest.raises(StdioProtocolError, match="no reply within 1 s to request 2"):
        await cp.head("s")


def test_store_hooks_are_offered_only_when_declared(
    served: StdioCheckpointer, tmp_path: Path
) -> None:
    assert isinstance(served, StoreHooks)  # the file backend has them, so the child declares them
    plain = StdioCheckpointer.start([sys.executable, CHILDREN, HELLO], tmp_path)
    assert not isinstance(plain, StoreHooks)
    asyncio.run(plain.close())


def test_a_store_hook_runs_in_a_process_of_its_own_on_the_closed_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    cp = StdioCheckpointer.start([*SERVE, "file"], store)
    asyncio.run(cp.append("s", [UserPrompt("a")]))
    asyncio.run(cp.close())
    assert isinstance(cp, StoreHooks)
    cp.mark_newer_schema(store)
    with pytest.raises(SchemaVersionError):  # the hello's typed error, raised as such
        StdioCheckpointer.start([*SERVE, "file"], store)


def test_a_reusable_child_serves_the_next_handle_from_scratch(tmp_path: Path) -> None:
    first_store, second_store = tmp_path / "a", tmp_path / "b"
    first_store.mkdir()
    second_store.mkdir()
    first = StdioCheckpointer.start([*SERVE, "file"], first_store)
    asyncio.run(first.append("s", [UserPrompt("a")]))
    pid = first._child.process.pid
    asyncio.run(first.close())
    second = StdioCheckpointer.start([*SERVE, "file"], second_store)
    try:
        assert second._child.process.pid == pid  # the same process, a new handle
        assert asyncio.run(second.head("s")) == 0  # on its own store: nothing of the first
        with pytest.raises(CheckpointerClosedError):
            asyncio.run(first.head("s"))  # the closed handle stays closed
    finally:
        asyncio.run(second.close())


@pytest.mark.parametrize(
    "command",
    [[sys.executable, CHILDREN, HELLO], [*SERVE, "--one-handle", "file"]],
    ids=["scripted", "serve --one-handle"],
)
def test_a_child_that_is_not_reusable_exits_once_later_handles_are_closed(
    tmp_path: Path, command: list[str]
) -> None:
    # Kept after close only to answer calls on its closed handle, the last few per command.
    def closed_process() -> subprocess.Popen[bytes]:
        cp = StdioCheckpointer.start(command, tmp_path)
        asyncio.run(cp.close())
        return cp._child.process

    first = closed_process()
    later = [closed_process() for _ in range(2)]
    assert first.wait(timeout=10) is not None
    assert all(process.poll() is None for process in later)


@synchronous
async def test_calls_after_close_reach_the_backend_which_answers_them(tmp_path: Path) -> None:
    # A scripted child that answers head after close with 5: nothing on the kit's side
    # refused the call for it.
    cp = await asyncio.to_thread(
        StdioCheckpointer.start,
        [sys.executable, CHILDREN, HELLO, '{"id":{id},"result":5}', '{"id":{id},"result":6}'],
        tmp_path,
    )
    await cp.close()
    assert await cp.head("") == 5  # an empty id too: the value is the backend's to refuse
    await cp.close()  # close again: answered by the child (the script has no line for it)
    assert await cp.head("s") == 6


@synchronous
async def test_a_closed_handle_whose_process_serves_another_asks_a_closed_one(
    tmp_path: Path,
) -> None:
    first = await asyncio.to_thread(StdioCheckpointer.start, [*SERVE, "file"], tmp_path)
    await first.append("s", [UserPrompt("a")])
    await first.close()
    second = await asyncio.to_thread(StdioCheckpointer.start, [*SERVE, "file"], tmp_path)
    assert second._child is first._child  # reused: the first handle's process is taken
    assert await second.head("s") == 1
    await second.close()  # parked again, as the process that closed the second handle
    parked = second._child
    assert not _pool.reclaim(parked, None, first._token)  # not the first handle's any more
    assert _pool.reclaim(parked, None, second._token)
    _pool.park(parked, None, True, second._token)
    with pytest.raises(CheckpointerClosedError) as refused:
        await first.read("s").__anext__()
    assert refused.value.operation == "read"
    # A process told hello and close for the first handle's store answered.
    assert first._child.closed_for is first._token


def test_without_spares_a_handle_starts_its_child_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kit worker opens one handle: the child started ahead would never serve one.
    command = [*SERVE, "--one-handle", "memory"]
    key = (tuple(command), None)
    monkeypatch.setattr(_pool, "starts_ahead", True)
    with_spare = StdioCheckpointer.start(command, tmp_path)
    asyncio.run(with_spare.close())
    assert key in _pool._spares
    _pool._spares.pop(key).end()
    without_spares()  # monkeypatch puts starts_ahead back afterwards
    alone = StdioCheckpointer.start(command, tmp_path)
    asyncio.run(alone.close())
    assert key not in _pool._spares


GATED_HEADS = """
import json, sys
asked, gate = sys.argv[1], sys.argv[2]  # two named pipes
heads = iter([7, 8])
for raw in sys.stdin:
    request = json.loads(raw)
    result = {"protocol": 1, "capabilities": []} if request["op"] == "hello" else None
    if request["op"] == "head":
        result = next(heads)
        if result == 7:  # the first: held until its caller is gone
            open(asked, "w").close()  # the request has come: the test may cancel its caller
            open(gate).read()  # the test opens the gate once its caller is gone
    sys.stdout.write(json.dumps({"id": request["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


@synchronous
async def test_a_call_whose_caller_stops_waiting_leaves_the_handle_in_step(
    tmp_path: Path,
) -> None:
    # The first head is cancelled while the child holds its answer; the handle must read
    # that answer (7) before the second head's, not take it for the second's.
    cp = await _cancelled_while_held(tmp_path, GATED_HEADS, lambda cp: cp.head("s"))
    assert await cp.head("s") == 8
    await cp.close()


async def _cancelled_while_held(
    tmp_path: Path, script: str, call: Callable[[StdioCheckpointer], Awaitable[object]]
) -> StdioCheckpointer:
    """A handle on the child ``script`` (given two named pipes: it says it has a request,
    then holds it until the gate opens) whose ``call`` was cancelled while held, the
    gate opened afterwards."""
    asked, gate = tmp_path / "asked", tmp_path / "gate"
    os.mkfifo(asked)
    os.mkfifo(gate)
    child = [sys.executable, "-c", script, str(asked), str(gate)]
    cp = await asyncio.to_thread(StdioCheckpointer.start, child, tmp_path / "store")
    held = asyncio.ensure_future(call(cp))
    await asyncio.to_thread(asked.read_bytes)  # ends when the child has the request
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    await asyncio.to_thread(gate.write_bytes, b"")
    return cp


@synchronous
async def test_pipelined_reads_answer_as_reads_one_by_one_do(served: StdioCheckpointer) -> None:
    await served.append("a", [UserPrompt("1"), UserPrompt("2")])
    await served.append("b", [UserPrompt("3")])
    ids = ["a", "missing", "", "b", "a"]  # "" is the child's to refuse, mid-way
    together = await served.read_logs(ids)
    for session_id, answer in zip(ids, together, strict=True):
        try:
            alone: object = [e async for e in served.read(session_id)]
        except InvalidArgumentError as exc:
            alone = exc
        if isinstance(alone, Exception):
            assert type(answer) is type(alone)
            assert answer.reason_code == alone.reason_code  # type: ignore[union-attr]
        else:
            assert answer == alone
    assert await served.head("b") == 1  # the handle is in step afterwards


COUNTING_CHILD = """
import json, os, sys
pipelined, log = sys.argv[1] == "yes", open(sys.argv[2], "a")  # a spare child opens it too
pending = b""
while chunk := os.read(0, 1 << 16):
    *lines, pending = (pending + chunk).split(b"\\n")
    log.write(f"{len(lines)}\\n")  # requests that came in one read
    log.flush()
    for line in lines:
        request = json.loads(line)
        if request["op"] == "hello":
            result = {"protocol": 1, "capabilities": [], "pipelined": pipelined}
        else:
            result = {"count": 0} if request["op"] == "read" else None
        sys.stdout.write(json.dumps({"id": request["id"], "result": result}) + "\\n")
        sys.stdout.flush()
"""


@pytest.mark.parametrize(("pipelined", "arrivals"), [("yes", ["1", "4"]), ("no", ["1"] * 5)])
@synchronous
async def test_a_pipelined_child_gets_the_reads_together_and_another_one_by_one(
    tmp_path: Path, pipelined: str, arrivals: list[str]
) -> None:
    log = tmp_path / "arrivals"
    child = [sys.executable, "-c", COUNTING_CHILD, pipelined, str(log)]
    cp = await asyncio.to_thread(StdioCheckpointer.start, child, tmp_path / "store")
    assert await cp.read_logs(["a", "b", "c", "d"]) == [[], [], [], []]
    # hello, then the four reads: in one write to a child that declared pipelined.
    assert log.read_text().split() == arrivals
    await cp.close()


@synchronous
async def test_a_breach_in_pipelined_reads_answers_the_reads_left(tmp_path: Path) -> None:
    hello = '{"protocol":1,"capabilities":[],"pipelined":true}'
    cp = await _start(tmp_path, hello, '{"id":{id},"result":{"count":0}}', "no JSON at all")
    first, second, third = await cp.read_logs(["a", "b", "c"])
    assert first == []
    assert isinstance(second, StdioProtocolError)
    assert second.expected_id == 3  # hello 0, the reads 2, 3, 4
    assert third is second  # never sent a request of its own: the conversation broke


GATED_READS = """
import json, sys
asked, gate = sys.argv[1], sys.argv[2]  # two named pipes
held = False
for raw in sys.stdin:
    request = json.loads(raw)
    if request["op"] == "hello":
        result = {"protocol": 1, "capabilities": [], "pipelined": True}
    elif request["op"] == "read":
        if not held:  # the first: held until its caller is gone
            held = True
            open(asked, "w").close()
            open(gate).read()
        result = {"count": 0}
    else:
        result = 5 if request["op"] == "head" else None
    sys.stdout.write(json.dumps({"id": request["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


@synchronous
async def test_pipelined_reads_whose_caller_stops_waiting_leave_the_handle_in_step(
    tmp_path: Path,
) -> None:
    # Three reads are sent; the caller is cancelled while the child holds the first.
    # The handle must read all three answers before the head's, not take one for it.
    cp = await _cancelled_while_held(
        tmp_path, GATED_READS, lambda cp: cp.read_logs(["a", "b", "c"])
    )
    assert await cp.head("s") == 5
    await cp.close()

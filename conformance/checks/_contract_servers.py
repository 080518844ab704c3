"""The server checks of a contract's store, shared by the framework suites.

A framework's store on a database server (a LangGraph saver, an OpenAI Agents
session, an ADK session service on PostgreSQL) is checked three ways on a throwaway
PostgreSQL cluster of the kit's own: its server killed at a moment of its calls and
started again, its connections cut at a byte drawn with the seed by the kit's proxy,
and its server's host power-cut at any point of a trace of the server. What differs
between the suites is the contract, the program, the rule a finding is filed under
and what the store is called; the check functions stay in their suite's module and
call these.

A store takes part when it opens on the server named by the ``dsn`` option of its
`BackendContext` (opened with an unreachable one, it fails); any other is skipped,
saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from ...spec import ServerAddress
from ..engines.contract.contract import Call, Contract
from ..engines.contract.violations import RuleViolation
from ..engines.crash.contract_power_loss import TraceUnusable
from ..engines.crash.contract_server_power_loss import server_power_loss_states
from ..engines.crash.recorder import attach_unavailable
from ..engines.crash.verdicts import quiet
from ..engines.history.linearizable import Recorded
from ..engines.network.proxy import Direction, Fault, FaultProxy
from ..engines.processes.contract_programs import judge_history, record_calls
from ..engines.run.harness import CheckSkipped, Harness, NothingExercised

if TYPE_CHECKING:  # the postgres extra's; imported where a server is launched
    from ...backends.postgres.cluster import Cluster

__all__ = ["UNREACHABLE_SERVER", "connections_cut", "server_killed", "server_power_cut"]

Store = TypeVar("Store")
State = TypeVar("State", bound=Hashable)

UNREACHABLE_SERVER: Final = "postgresql://checkpointspec@127.0.0.1:1/unreachable"
"""The ``dsn`` option a store is first opened with: a store that takes its server from
the option cannot open (nothing listens on port 1), one that does not opens anyway."""


async def _open_on(h: Harness, contract: Contract[Store, State], path: Path, dsn: str) -> Store:
    """The store in ``path`` on the server ``dsn`` names, opened as the contract opens it."""
    target = h.target
    return await contract.open_store(target.factory(), target.context(path, options={"dsn": dsn}))


async def _takes_its_server_from_the_options(
    h: Harness, contract: Contract[Store, State], program: Sequence[Call]
) -> bool:
    """Whether the store works on the server the ``dsn`` option names: opened with an
    unreachable one, it fails to open or to answer the first read of ``program``'s
    (a store may connect only when first asked)."""
    assert contract.readback is not None, f"contract {contract.name!r} has no readback"
    try:
        store = await _open_on(h, contract, h.new_store(), UNREACHABLE_SERVER)
    except Exception:  # the store's: it tried the server it was given
        return True
    try:
        answers = [await contract.answer(store, c) for c in contract.readback(program)[:1]]
    finally:
        with contextlib.suppress(Exception):  # closing what never connected
            await contract.close(store)
    return any(isinstance(answer, BaseException) for answer in answers)


@contextlib.asynccontextmanager
async def _server_of_its_own(
    h: Harness, contract: Contract[Store, State], program: Sequence[Call], what: str
) -> AsyncIterator[Cluster]:
    """A throwaway PostgreSQL cluster for a store that takes its server from the ``dsn``
    option; skipped for one that does not, not judged where none can be launched."""
    if not await _takes_its_server_from_the_options(h, contract, program):
        raise CheckSkipped(
            f"{what} opened with an unreachable server in its dsn option: it keeps its "
            "data elsewhere (files, memory), or takes its server from somewhere the kit "
            "cannot point at a server of its own"
        )
    try:  # the package needs psycopg (the postgres extra), which the core does not
        from ...backends.postgres.cluster import ClusterError, make_cluster
    except ImportError as exc:
        raise NothingExercised(
            f"the kit launches its PostgreSQL server with the postgres extra ({exc}): "
            "pip install 'checkpointspec[postgres]'"
        ) from exc
    try:
        cluster = await asyncio.to_thread(make_cluster)
    except ClusterError as exc:  # this machine's lack, not the store's
        raise NothingExercised(f"no PostgreSQL server can be launched here: {exc}") from exc
    try:
        yield cluster
    finally:
        await asyncio.to_thread(cluster.remove)


async def _read_back_and_judge(
    h: Harness,
    contract: Contract[Store, State],
    cluster: Cluster,
    path: Path,
    program: Sequence[Call],
    history: list[Recorded],
    finding: RuleViolation,
) -> None:
    """Read everything ``program`` may have changed through a fresh store straight to
    ``cluster`` and judge it with ``history``; what no order explains is raised as
    ``finding``, its message (what happened) followed by the history checker's."""
    assert contract.readback is not None, f"contract {contract.name!r} has no readback"
    again = await _open_on(h, contract, path, cluster.dsn)
    try:
        history += await record_calls(contract, again, list(contract.readback(program)), 1)
    finally:
        await contract.close(again)
    try:
        judge_history(contract, history, finding.message)
    except RuleViolation as found:
        raise RuleViolation(finding.rule_id, found.message, shape=finding.shape) from found


async def _killed_round(
    h: Harness,
    contract: Contract[Store, State],
    cluster: Cluster,
    program: Sequence[Call],
    rng: random.Random,
    rule_id: str,
    shown: Callable[[Call], str],
) -> None:
    """Make ``program`` on a fresh store of ``cluster``, kill the server right after a
    call drawn with ``rng`` was answered or a moment into it, start it again, read
    everything back through a fresh store and judge the history."""
    path = h.new_store()
    store = await _open_on(h, contract, path, cluster.dsn)
    killed_at = rng.randrange(len(program))
    history: list[Recorded] = []
    try:
        history += await record_calls(contract, store, program[:killed_at], 0)
        call = program[killed_at]
        if rng.random() < 0.5:  # right after the server answered the call
            history += await record_calls(contract, store, [call], 0)
            await asyncio.to_thread(cluster.crash)
            when = f"right after {shown(call)} was answered"
        else:  # a moment into the call, drawn with the seed
            in_flight = asyncio.ensure_future(record_calls(contract, store, [call], 0))
            await asyncio.sleep(rng.uniform(0.0, 0.02))  # a random kill moment, not a wait
            await asyncio.to_thread(cluster.crash)
            history += await in_flight
            when = f"a moment into {shown(call)}"
    finally:
        with contextlib.suppress(Exception):  # its connection died with the server
            await contract.close(store)
    await asyncio.to_thread(cluster.start)
    await _read_back_and_judge(
        h,
        contract,
        cluster,
        path,
        program,
        history,
        RuleViolation(
            rule_id,
            f"the server was killed {when}",
            shape="a state a killed server kept that no prefix of the answered calls gives",
        ),
    )


async def server_killed(
    h: Harness,
    contract: Contract[Store, State],
    program: Sequence[Call],
    rule_id: str,
    *,
    what: str,
    shown: Callable[[Call], str] = str,
) -> None:
    """Kill the store's own server the profile's ``server_kills`` times, each at a call
    of ``program`` drawn with the seed; a state no prefix of the answered calls gives is
    ``rule_id``'s. ``what`` names the store in a skip ("the saver"), ``shown`` a call
    in a finding."""
    rng = random.Random(h.seed)
    kills = 0
    async with _server_of_its_own(h, contract, program, what) as cluster:
        for _ in h.slice.within(range(h.profile.server_kills), "server kills"):
            await _killed_round(h, contract, cluster, program, rng, rule_id, shown)
            kills += 1
    h.measure(
        f"the server killed {kills} times, each at a call of {len(program)} drawn with the seed"
    )


def _cut_of(seed: int, round_: int, connection: int, calls: int) -> Fault:
    """The cut of a store's ``connection`` in ``round_``: within the first two chunks per
    call of one direction (a call is a request and its response, or a pipeline of them),
    so that it lands among the calls; towards the client two times in three, where a
    lost response to a commit is a call whose outcome the store cannot know; half
    inside a chunk, a third with a reset."""
    rng = random.Random(f"{seed}:{round_}:{connection}")
    direction: Direction = "to_client" if rng.random() < 2 / 3 else "to_server"
    return Fault(
        cut=direction,
        at_chunk=rng.randrange(2 * calls),
        torn_bytes=rng.randint(1, 12) if rng.random() < 0.5 else 0,
        reset=rng.random() < 1 / 3,
    )


async def _cut_round(
    h: Harness,
    contract: Contract[Store, State],
    cluster: Cluster,
    program: Sequence[Call],
    round_: int,
    rule_id: str,
    what: str,
) -> int:
    """Make ``program`` on a fresh store of ``cluster`` through a proxy that cuts each of
    the store's connections at a byte drawn with the seed, then read everything back
    straight from the server and judge the history. Returns how many cuts fired."""
    path = h.new_store()
    target = ServerAddress("127.0.0.1", cluster.port)
    with FaultProxy(target) as proxy, quiet():
        routed = cluster.dsn.replace(f":{cluster.port}/", f":{proxy.address.port}/")
        store = await _open_on(h, contract, path, routed)
        # Armed once the store is open: its connection is cut among its calls, not in
        # the factory's setup.
        proxy.arm(lambda connection: _cut_of(h.seed, round_, connection, len(program)))
        try:
            history = await record_calls(contract, store, program, 0)
        finally:
            with contextlib.suppress(Exception):  # a cut connection may not close cleanly
                await contract.close(store)
        fired = list(proxy.fired)
    cuts = "; ".join(f"connection {f.connection}: {f.fault.describe()}" for f in fired)
    await _read_back_and_judge(
        h,
        contract,
        cluster,
        path,
        program,
        history,
        RuleViolation(
            rule_id,
            f"{what}'s connections cut ({cuts or 'none fired'})",
            shape="a state cut connections left that no prefix of the answered calls gives",
        ),
    )
    return len(fired)


async def connections_cut(
    h: Harness,
    contract: Contract[Store, State],
    program: Sequence[Call],
    rule_id: str,
    *,
    what: str,
) -> None:
    """Make ``program`` through the kit's proxy the profile's ``server_kills`` times, the
    store's connections cut at bytes drawn with the seed; a state no prefix of the
    answered calls gives is ``rule_id``'s."""
    cuts = rounds = 0
    async with _server_of_its_own(h, contract, program, what) as cluster:
        for round_ in h.slice.within(range(h.profile.server_kills), "rounds of cut connections"):
            cuts += await _cut_round(h, contract, cluster, program, round_, rule_id, what)
            rounds += 1
    if cuts == 0:
        raise NothingExercised(
            f"no connection was cut in {rounds} rounds: the calls were too short"
        )
    h.measure(f"{cuts} connections cut in {rounds} rounds of {len(program)} calls")


async def server_power_cut(
    h: Harness,
    contract: Contract[Store, State],
    contract_ref: str,
    program: Sequence[Call],
    rule_id: str,
    *,
    what: str,
) -> None:
    """Judge the profile's ``server_states`` power cuts of the store's own server's host,
    rebuilt from a trace of the server during ``program``; a state no prefix of the
    answered calls gives is ``rule_id``'s."""
    reason = attach_unavailable()
    if reason is not None:  # this machine's lack, not the store's: nothing is judged
        raise NothingExercised(f"the server cannot be traced here: {reason}")
    async with _server_of_its_own(h, contract, program, what) as cluster:
        try:
            covered = await server_power_loss_states(
                contract_ref,
                h.target,
                h.root,
                program,
                cluster,
                budget=h.profile.server_states,
                seed=h.seed,
            )
        except RuleViolation as found:
            raise RuleViolation(
                rule_id,
                found.message,
                shape="a state a power cut of the server left that no prefix of the answered "
                "calls gives",
            ) from found
        except TraceUnusable as exc:
            raise NothingExercised(f"the server's trace cannot be judged: {exc}") from exc
    h.measure(
        f"{covered.states} power cuts of the server judged, of {covered.possible} "
        f"({covered.operations} operations on its data directory traced)"
    )

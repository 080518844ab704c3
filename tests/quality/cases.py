"""How the kit is run to reject each deliberately broken backend: the meta-suite's cases.

Every broken backend (`broken_backends`, `hard_backends`, `racy_backends`,
`server_backends`) names the rule it breaks in ``violates``. A `Case` says how to
show it: the checks to run (``--only``), the seeds that must each catch it, and,
for a run too costly for the default test run, why it only runs with the
``slow`` ones. The meta-suite's contract (``test_meta_contract.py``): every MUST
rule of the catalog is broken by some case's backend, and every case's run
rejects its backend naming that rule (``test_kit_catches_bugs.py``,
``test_kit_catches_hard_bugs.py``, ``test_kit_catches_server_bugs.py``).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, NamedTuple

from broken_backends import BROKEN, Broken
from hard_backends import (
    HARD,
    CachedHead,
    DecodeFailureIsTornTail,
    EncodeFailureStoresPlaintext,
    EncodesOncePerLength,
    EventAtATime,
    Hard,
    HeadAheadOfAppend,
    LockOutlivesHolder,
    NoDirectorySync,
    PlaintextFallback,
    PlaintextSearchIndex,
    StripsTrailingWhitespace,
    TruncatesEventAtATime,
    UpgradesFormatOnOpen,
)
from racy_backends import (
    RACY,
    CheckThenAppend,
    DeleteInTwoTransactions,
    PreparesBeforeVersionCheck,
    Racy,
    StaleHead,
    TruncateInTwoTransactions,
)

if TYPE_CHECKING:
    from server_backends import Server

__all__ = [
    "ALL_BACKENDS",
    "ALL_CASES",
    "HARD_CASES",
    "HELD_CLIENT_CASES",
    "MEMORY_CASES",
    "SEED",
    "SERVER_CASES",
    "SERVER_CRASH_CASES",
    "SERVER_FAULT_CASES",
    "Case",
]

SEED = 1729
"""The seed of every memory case."""

HARD_SEEDS = (0, 1, 2)
"""The seeds each hard case whose verdict a seed could change must be caught with."""


class Case(NamedTuple):
    """One broken backend, the checks that must reject it, and the seeds they run with."""

    backend: type[Broken] | type[Hard] | type[Racy] | type[Server]
    checks: tuple[str, ...]
    seeds: tuple[int, ...]
    slow: str | None = None
    """Why the run belongs to the ``slow`` tests; None for the default run."""

    @property
    def name(self) -> str:
        return self.backend.__name__

    @property
    def rule(self) -> str:
        """The rule the kit must report failed."""
        return self.backend.violates

    @property
    def target(self) -> str:
        """What the kit loads: ``module:Class.make``."""
        return f"{self.backend.__module__}:{self.backend.__qualname__}.make"


_MEMORY_CHECKS: dict[str, tuple[str, ...]] = {
    # The model-based check named after SEQ-001 also catches it, in seconds rather
    # than milliseconds.
    "SeqsRestartEachBatch": ("SEQ-001::seqs_are_contiguous_across_batches",),
    # The free-running check blames the forks it sees on APPEND-004 first.
    "SharedOnlyInProcess": ("MP-001::processes_share_one_log",),
    # Only GEN-002's check truncates with the current generation.
    "TruncateTakesAFirstGenerationForOne": ("GEN-002::expected_generation_catches_aba",),
}
"""Memory cases that run some of the checks named after their rule; the others run all of them."""

_MEMORY_SLOW: dict[str, str] = {
    "DurableInProcessMemory": "starts a writer process and kills it",
    "SharedOnlyInProcess": "starts three writer processes",
}

MEMORY_CASES: tuple[Case, ...] = tuple(
    Case(cls, _MEMORY_CHECKS.get(name, (f"{cls.violates}::",)), (SEED,), _MEMORY_SLOW.get(name))
    for name, cls in BROKEN.items()
)
"""One case per backend of `broken_backends`."""

HANDLES = "HANDLE-001::handles_share_one_log"
RACING = "APPEND-004::racing_appends_never_fork"
COMMANDED = "KILL-001::commanded_workers"
HELD_KILLS = "KILL-001::killed_after_every_system_call"
POWER_LOSS = "DUR-003::acknowledged_writes_survive_power_loss"
NEWER_FORMAT = "SCHEMA-001::newer_store_is_refused_untouched"
ROUND_TRIP = "CODEC-001::payloads_round_trip_through_the_codec"
ENCODE_FAILS = "CODEC-002::encode_failure_writes_nothing"
DECODE_FAILS = "CODEC-003::decode_failure_is_raised_not_repaired"
WRONG_KEY = "CODEC-004::no_plaintext_fallback"
AT_REST = "CODEC-005::no_plaintext_at_rest"
FREE_RUNNING = "MP-001::free_running_history"
DEAD_HOLDER = "MAINT-004::dead_holder_frees_the_lock"

HARD_CASES: tuple[Case, ...] = (
    Case(CachedHead, (HANDLES,), HARD_SEEDS),
    # Only a kill between the writes of one batch shows the bug, and only some
    # seeds make the commanded machine do that; see test_kit_catches_hard_bugs.
    Case(EventAtATime, (COMMANDED,), (0,)),
    # The first crash state that drops an unsynced directory entry shows it.
    # Holds are allotted per kind of write: the truncate is held twice, spread over
    # its calls, so a kill lands between two of its cuts on every seed.
    Case(TruncatesEventAtATime, (HELD_KILLS,), HARD_SEEDS),
    Case(NoDirectorySync, (POWER_LOSS,), (0,)),
    Case(UpgradesFormatOnOpen, (NEWER_FORMAT,), (0,)),
    Case(EncodesOncePerLength, (ROUND_TRIP,), (0,)),
    Case(EncodeFailureStoresPlaintext, (ENCODE_FAILS,), (0,)),
    Case(DecodeFailureIsTornTail, (DECODE_FAILS,), HARD_SEEDS),
    Case(PlaintextFallback, (WRONG_KEY,), HARD_SEEDS),
    Case(PlaintextSearchIndex, (AT_REST,), (0,)),
    # test_kit_catches_hard_bugs also runs the whole quick profile on it: every check
    # that starts, holds or kills processes must end in a verdict.
    Case(StripsTrailingWhitespace, ("EVENT-001::",), (0,)),
    # A holder process killed while it holds the session: one worker, a second seconds.
    Case(LockOutlivesHolder, (DEAD_HOLDER,), (0,)),
    # Tasks racing on one head through three handles all succeed.
    Case(CheckThenAppend, (RACING,), HARD_SEEDS),
    Case(StaleHead, (FREE_RUNNING,), (SEED,), "four processes hammer the store for seconds"),
    # Writers that read a head one too high conflict on every append: MP-001 ends on
    # their count of conflicts, not on a worker's deadline.
    Case(HeadAheadOfAppend, ("MP-001::processes_share_one_log",), (0,)),
    # The table it creates before reading the version lands in the newer store.
    Case(PreparesBeforeVersionCheck, (NEWER_FORMAT,), (0,)),
    # A delete racing another process's append leaves events beyond a head of 0.
    Case(
        DeleteInTwoTransactions,
        (FREE_RUNNING,),
        (SEED,),
        "four processes hammer the store for seconds",
    ),
    # Only a kill between the truncate's two transactions shows it as KILL-001:
    # the commanded machine pauses truncates at truncate.locked and kills some of
    # them (seed 0 of 0-3; seed 2 shows a read of the half-done truncate, READ-003).
    Case(
        TruncateInTwoTransactions,
        (COMMANDED,),
        (0,),
        "three worker processes are paused and killed for a minute",
    ),
)
"""One case per backend of `hard_backends` and `racy_backends`."""

SERVER_KILLED = "DUR-002::server_killed_keeps_acknowledged_writes"
SERVER_POWER_CUT = "DUR-003::server_power_loss_from_its_trace"
FAILOVER = "DUR-004::acknowledged_writes_survive_failover"
CUT_CONNECTIONS = "NET-001::cut_connections_lose_nothing"
WAITING_KILL = "KILL-001::killed_while_waiting_for_another_writer"

POSTGRES_INSTALLED = importlib.util.find_spec("psycopg") is not None
"""Whether the ``postgres`` extra is installed: the server cases' backends need it."""

HELD_CLIENT_CASES: tuple[Case, ...] = ()
"""The backends of `server_backends` a client held and killed at a round trip shows; their
runs (tests/quality/test_kit_catches_server_bugs.py) need a PostgreSQL server."""

SERVER_CRASH_CASES: tuple[Case, ...] = ()
"""The backends of `server_backends` declaring DURABLE on servers launched with a setting
that breaks it; their runs (tests/quality/test_kit_catches_server_crash_bugs.py) need
PostgreSQL (``initdb``) and strace."""

SERVER_FAULT_CASES: tuple[Case, ...] = ()
"""The backends of `server_backends` the kit's fault proxy and failover pair show: they
need a PostgreSQL server, so their runs are tests/backends/test_postgres_server_checks.py's."""

SERVER: dict[str, type[Server]] = {}
if POSTGRES_INSTALLED:  # none without the postgres extra
    import server_backends

    SERVER = server_backends.SERVER
    HELD_CLIENT_CASES = (
        # The second writer, killed while it waits for the held first one, has sent its
        # COMMIT with the write: the server commits it once the first is let go, after a
        # read that did not wait left it out. The first writer is held after each of its
        # few sends, so every seed reaches the one after its call.
        Case(
            server_backends.CommitSentWithTheCall,
            (WAITING_KILL,),
            HARD_SEEDS,
            "four worker processes and a PostgreSQL store per hold: about 20 s a seed",
        ),
    )
    SERVER_CRASH_CASES = (
        # The first kill comes right after an acknowledgement: the commit is still in
        # the server's memory, on every seed.
        Case(server_backends.SynchronousCommitOff, (SERVER_KILLED,), HARD_SEEDS),
        # A kill keeps the page cache, so only a power cut shows it; the power cut right
        # after each acknowledgement is checked first, on every seed.
        Case(server_backends.FsyncOff, (SERVER_POWER_CUT,), HARD_SEEDS),
    )
    SERVER_FAULT_CASES = (
        # Every seed stalls the replication stream before the primary is killed: the
        # commits acknowledged meanwhile never reach the standby.
        Case(server_backends.AsynchronousStandbyClaimsReplicated, (FAILOVER,), HARD_SEEDS),
        # Every connection is cut, 80% of them towards the client at a message boundary
        # or inside one, some in the response to an append's COMMIT (caught on 12 of 12
        # seeds, 0-11).
        Case(server_backends.ResendsAfterLostCommit, (CUT_CONNECTIONS,), HARD_SEEDS),
    )

SERVER_CASES: tuple[Case, ...] = HELD_CLIENT_CASES + SERVER_CRASH_CASES + SERVER_FAULT_CASES
"""One case per backend of `server_backends`."""

ALL_CASES: tuple[Case, ...] = MEMORY_CASES + HARD_CASES + SERVER_CASES

ALL_BACKENDS: dict[str, type[Broken] | type[Hard] | type[Racy] | type[Server]] = {
    **BROKEN,
    **HARD,
    **RACY,
    **SERVER,
}
"""Every broken backend of the four modules, by class name."""

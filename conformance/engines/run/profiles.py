"""How hard the kit tries: example counts per profile, and the time a run may take."""

from __future__ import annotations

import msgspec

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile"]


class Profile(msgspec.Struct, frozen=True):
    """Budgets for one run.

    ``stateful_examples`` times ``stateful_steps`` bound the model-based machine;
    ``property_examples`` bounds each property check; ``process_rounds`` the
    multi-process and kill checks.
    """

    name: str
    stateful_examples: int
    stateful_steps: int
    property_examples: int
    process_rounds: int
    commanded_examples: int = 10
    """Runs of the commanded-workers machine (each starts three worker processes once)."""
    commanded_steps: int = 20
    powerloss_states: int = 1000
    """Crash states the simulated-disk power-loss check (DUR-003) rebuilds, reopens and verifies."""
    kill_states: int = 150
    """States of a traced writer killed after one of its system calls (DUR-002) that are checked."""
    traced_states: int = 300
    """Power-loss states rebuilt from a traced writer's system calls (DUR-003) that are checked."""
    held_writes: int = 40
    """Writers held after one of their system calls, per check: killed (KILL-001) or read from (READ-003)."""
    held_every_call: bool = False
    """Whether a held write is held after every one of its store calls (or round trips to
    a server) the budget reaches, rather than a seeded sample of them (`holds.PER_WRITE`)."""
    stress_processes: int = 4
    """Worker processes of the free-running stress check (MP-001)."""
    stress_operations: int = 1_000
    """Calls the stress workers make between them."""
    stress_seconds: float = 30.0
    """A cap on each stress worker's time: one that reaches it with calls of
    ``stress_operations`` unmade leaves the check incomplete."""
    stress_kills: int = 1
    """Stress workers killed (SIGKILL) at a random moment of the run."""
    budget_seconds: float | None = None
    """A cap on the run's wall-clock time (``--budget`` overrides it): a safety net, well
    above what the counts take on a loaded 2-core machine; a check it stops before
    its counts is incomplete (`checkpointspec.conformance.engines.search.budget`). None:
    no cap."""
    failure_seconds: float | None = None
    """The wall-clock time a run's work beyond its counts is shared out of: a failure's
    shrinking and the exploration rounds after it (`checkpointspec.conformance.running.slices`).
    Neither is a count (a failure stands however far it was shrunk), so on a backend
    that fails, the run ends near this time rather than at the cap. None: the cap's."""
    exploration_rounds: int = 6
    """Hypothesis runs a property or model-based check makes at most: each one after a
    failure tolerates the rules found so far and looks for the next finding
    (`checkpointspec.conformance.engines.search.exploration`)."""
    connection_calls: int = 300
    """Calls each of the two writers makes through the fault-injecting proxy (NET-001)."""
    failovers: int = 1
    """Failover pairs started, written to, and failed over (DUR-004)."""
    server_kills: int = 10
    """Times a launched server is killed (DUR-002 of a server backend); each costs a restart."""
    server_states: int = 40
    """Power cuts of a launched server's data directory rebuilt from its trace (DUR-003 of a
    server backend) that are checked; each costs a server started on a copy."""


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        "quick",
        stateful_examples=100,
        stateful_steps=30,
        property_examples=80,
        process_rounds=2,
        commanded_examples=10,
        commanded_steps=20,
        powerloss_states=200,
        kill_states=100,
        traced_states=150,
        held_writes=8,
        stress_operations=2_000,
        stress_seconds=60.0,
        exploration_rounds=4,
        budget_seconds=300.0,
        failure_seconds=60.0,
        server_kills=4,
        server_states=8,
    ),
    "default": Profile(
        "default",
        stateful_examples=150,
        stateful_steps=50,
        property_examples=150,
        process_rounds=5,
        commanded_examples=25,
        commanded_steps=30,
        powerloss_states=1000,
        kill_states=300,
        traced_states=600,
        held_writes=40,
        stress_operations=5_000,
        stress_seconds=300.0,
        budget_seconds=1800.0,
        failure_seconds=600.0,
        connection_calls=400,
        failovers=2,
    ),
    "thorough": Profile(
        "thorough",
        stateful_examples=1000,
        stateful_steps=80,
        property_examples=1000,
        process_rounds=30,
        commanded_examples=200,
        commanded_steps=40,
        powerloss_states=5000,
        kill_states=3000,
        traced_states=5000,
        held_writes=300,
        held_every_call=True,
        stress_operations=32_000,
        stress_seconds=1800.0,
        stress_kills=2,
        exploration_rounds=12,
        budget_seconds=14400.0,
        failure_seconds=3600.0,
        connection_calls=2000,
        failovers=6,
        server_kills=40,
        server_states=150,
    ),
}

DEFAULT_PROFILE = "default"
"""The profile of a run that names none: the CLI, the pytest plugin and `run_kit` alike."""

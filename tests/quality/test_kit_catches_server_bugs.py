"""Does the kit find what only a client killed at a round trip shows? Every backend in `server_backends` must be rejected.

Each server backend is the PostgreSQL reference backend with one bug. The kit,
restricted to the checks of the backend's case (`cases.HELD_CLIENT_CASES`), run on
the quick profile with each of the case's seeds against the ``postgres_dsn``
server, must exit 1 and report the bug's rule failed, also with the backend
served over the stdio protocol; the same checks must pass the reference
backend, so the verdict is the bug's and not the check's.

``CommitSentWithTheCall`` (``COMMIT`` sent with the write, reads that do not
wait for writes in flight) is the PostgreSQL backend's most serious bug so far,
once found by a random kill: KILL-001's writer killed while it waits for
another writer, held right after each of its round trips, catches it on every
seed.
"""

from __future__ import annotations

import shlex
import sys

import pytest
from cases import HELD_CLIENT_CASES, WAITING_KILL, Case
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import assert_caught, describe


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "seed"),
    [
        pytest.param(case, seed, id=f"{case.name}-{seed}")
        for case in HELD_CLIENT_CASES
        for seed in case.seeds
    ],
)
def test_server_bug_is_caught(case: Case, seed: int, postgres_dsn: str) -> None:
    run = plan_run(
        case.target,
        profile="quick",
        seed=seed,
        only=case.checks,
        options={"dsn": postgres_dsn},
    )
    assert_caught(run_kit(run), case.rule)


@pytest.mark.slow
@pytest.mark.usefixtures("broken_backends_importable")
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in HELD_CLIENT_CASES])
def test_server_bug_is_caught_over_stdio(case: Case, postgres_dsn: str) -> None:
    """The backend in a child process behind the stdio protocol, as one in another
    language would be: the stopper traces the worker's whole tree, the child's sends
    to the server included."""
    served = shlex.join([sys.executable, "-m", "checkpointspec.backends.stdio.serve", case.target])
    run = plan_run(
        None,
        process=served,
        profile="quick",
        seed=case.seeds[0],
        only=case.checks,
        options={"dsn": postgres_dsn},
    )
    assert_caught(run_kit(run), case.rule)


@pytest.mark.slow
def test_reference_passes_the_same_checks(postgres_dsn: str) -> None:
    run = plan_run(
        "postgres", profile="quick", seed=0, only=[WAITING_KILL], options={"dsn": postgres_dsn}
    )
    report = run_kit(run)
    assert report.exit_status == 0, describe(report)
    assert [c.status for c in report.checks] == ["passed"], describe(report)

"""Does the kit hold a server backend to its DURABLE claim? Every such backend in `server_backends` must be rejected.

Each is the PostgreSQL reference backend declaring DURABLE on servers launched
with one setting that breaks the claim (`cases.SERVER_CRASH_CASES`): the kit, run with
the case's checks and seeds, must exit 1 and report its rule failed. The
reference backend, whose servers run with ``fsync=on`` and
``synchronous_commit=on``, must pass the same checks on the same seeds, so a
verdict is the setting's and not the check's.

* ``SynchronousCommitOff``: the server acknowledges a commit that is still in
  its memory; killing it right after the acknowledgement loses the commit
  (DUR-002). Its power cuts lose it too.
* ``FsyncOff``: the server writes its log but never syncs it. A kill keeps
  everything (the page cache outlives the server); only the power cuts rebuilt
  from its trace show acknowledged commits lost (DUR-003).
"""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from cases import HARD_SEEDS, SERVER_CRASH_CASES, SERVER_KILLED, SERVER_POWER_CUT, Case
from checkpointspec.conformance.engines.crash.recorder import attach_unavailable
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.runner import run_kit
from kit_reports import assert_caught, describe

pytestmark = pytest.mark.skipif(
    attach_unavailable() is not None, reason=f"no tracer for the server: {attach_unavailable()}"
)


@pytest.mark.parametrize(
    ("case", "seed"),
    [
        pytest.param(case, seed, id=f"{case.name}-{seed}")
        for case in SERVER_CRASH_CASES
        for seed in case.seeds
    ],
)
def test_server_bug_is_caught(case: Case, seed: int, postgres_dsn: str) -> None:
    report = run_kit(
        plan_run(
            case.target,
            profile="quick",
            seed=seed,
            only=case.checks,
            options={"dsn": postgres_dsn},
        )
    )
    assert_caught(report, case.rule)


@pytest.mark.parametrize("seed", HARD_SEEDS)
def test_reference_passes_the_server_checks(seed: int, postgres_dsn: str) -> None:
    report = run_kit(
        plan_run(
            "postgres",
            profile="quick",
            seed=seed,
            only=[SERVER_KILLED, SERVER_POWER_CUT],
            options={"dsn": postgres_dsn},
        )
    )
    assert report.exit_status == 0, describe(report)
    assert [c.status for c in report.checks] == ["passed"] * 2, describe(report)

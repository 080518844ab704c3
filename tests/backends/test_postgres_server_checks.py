"""The kit's server checks on PostgreSQL: the reference backend passes, each broken one is rejected.

NET-001 runs two writers through the kit's fault proxy; DUR-004 starts a
primary and a streaming standby (`checkpointspec.backends.postgres.replication`),
kills the primary with the replication stream stalled and promotes the
standby. The reference backend with ``replication=synchronous`` passes both;
the broken backends of ``tests/quality/server_backends.py`` (cases in
``tests/quality/cases.py``: an asynchronous standby declared REPLICATED, an
append sent again after a lost COMMIT without looking for its request id) are
each rejected with their rule. The first seed of each runs in the default
tests, the others with the slow ones.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from checkpointspec.backends.postgres.replication import PostgresPair, dsn_via, server_address
from checkpointspec.conformance.checks import network
from checkpointspec.conformance.engines.network.proxy import CLEAN
from checkpointspec.conformance.running.plan import plan_run
from checkpointspec.conformance.running.report import KitReport, summarise_rules
from checkpointspec.conformance.running.runner import run_check, run_kit
from checkpointspec.spec import ServerAddress
from psycopg.conninfo import conninfo_to_dict

# The meta-suite's cases and report helpers, and the broken backends they name.
QUALITY = str(Path(__file__).resolve().parents[1] / "quality")
if QUALITY not in sys.path:
    sys.path.insert(0, QUALITY)

from cases import CUT_CONNECTIONS, FAILOVER, HARD_SEEDS, SERVER_FAULT_CASES, Case  # noqa: E402
from kit_reports import describe, failed_checks, verdict  # noqa: E402

pytestmark = pytest.mark.usefixtures("broken_backends_importable")


def _run(target: str, dsn: str, seed: int, only: tuple[str, ...], **options: str) -> KitReport:
    return run_kit(
        plan_run(target, profile="quick", seed=seed, only=only, options={"dsn": dsn, **options})
    )


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(seed, id=f"seed{seed}", marks=[pytest.mark.slow] if i else [])
        for i, seed in enumerate(HARD_SEEDS)
    ],
)
def test_the_reference_backend_passes_the_server_checks(postgres_dsn: str, seed: int) -> None:
    report = _run(
        "postgres", postgres_dsn, seed, (FAILOVER, CUT_CONNECTIONS), replication="synchronous"
    )
    assert report.exit_status == 0, describe(report)
    assert [c.status for c in report.checks] == ["passed", "passed"], describe(report)


def test_a_connection_opened_in_the_factory_is_cut_too(postgres_dsn: str) -> None:
    """The proxy arms the connections already open: a client that connects once in its
    factory and reuses that connection has it cut, and NET-001 is checked."""
    report = _run("server_backends:ConnectsInTheFactory.make", postgres_dsn, 0, (CUT_CONNECTIONS,))
    (check,) = report.checks
    assert check.status == "passed", describe(report)
    cut = re.search(r"(\d+) of (\d+) connections cut", check.detail)
    assert cut is not None, describe(report)
    assert int(cut[1]) > 0, describe(report)


def test_a_proxy_that_cuts_nothing_leaves_net_001_not_checked(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(network, "draw_fault", lambda _seed, _connection: CLEAN)
    run = plan_run("postgres", profile="quick", seed=0, options={"dsn": postgres_dsn})
    result = run_check(network.cut_connections_lose_nothing, run)
    assert result.status == "not_checked", result
    assert "cut none of the" in result.reason, result
    (rule,) = summarise_rules([result], (), rule_ids=["NET-001"])
    assert rule.status == "not_checked", rule


def test_without_a_synchronous_standby_the_failover_check_is_skipped(postgres_dsn: str) -> None:
    report = _run("postgres", postgres_dsn, 0, (FAILOVER,), replication="asynchronous")
    assert verdict(report, "DUR-004").status == "skipped", describe(report)
    assert "replicated" in verdict(report, "DUR-004").reason, describe(report)


@pytest.mark.parametrize(
    ("case", "seed"),
    [
        pytest.param(case, seed, id=f"{case.name}-{seed}", marks=[pytest.mark.slow] if i else [])
        for case in SERVER_FAULT_CASES
        for i, seed in enumerate(case.seeds)
    ],
)
def test_a_broken_server_backend_is_rejected_with_its_rule(
    postgres_dsn: str, case: Case, seed: int
) -> None:
    report = _run(case.target, postgres_dsn, seed, case.checks)
    assert report.exit_status == 1, describe(report)
    assert verdict(report, case.rule).status == "failed", describe(report)
    assert failed_checks(report, case.rule), describe(report)


# -- how the kit reaches a PostgreSQL server elsewhere ----------------------------------


def test_a_dsn_routed_through_an_address_keeps_everything_but_host_and_port() -> None:
    routed = dsn_via(
        "postgresql://app@db.internal:5433/sessions?application_name=x",
        ServerAddress("127.0.0.1", 6000),
    )
    assert conninfo_to_dict(routed) == {
        "user": "app",
        "dbname": "sessions",
        "application_name": "x",
        "host": "127.0.0.1",
        "port": "6000",
    }


@pytest.mark.parametrize(
    ("dsn", "address"),
    [
        ("postgresql://app@127.0.0.1:5433/db", ServerAddress("127.0.0.1", 5433)),
        ("host=localhost dbname=db", ServerAddress("localhost", 5432)),
        ("host=/var/run/postgresql dbname=db", None),
        ("postgresql://app@h1:1,h2:2/db", None),
    ],
)
def test_the_server_address_of_a_dsn(dsn: str, address: ServerAddress | None) -> None:
    assert server_address(dsn) == address


def test_a_pair_whose_kit_died_is_reaped_by_the_next_cluster_start(
    cluster_helper: ModuleType, tmp_path: Path
) -> None:
    pair = asyncio.run(PostgresPair.start(tmp_path, "synchronous"))
    homes = [Path(line.split()[1]) for line in (tmp_path / "pair.txt").read_text().splitlines()]
    dead = subprocess.Popen(["true"])
    dead.wait()
    for home in homes:
        (home / "holder").write_text(f"{dead.pid}\n")
    try:
        reaped = cluster_helper.reap_stale()
        assert set(homes) <= set(reaped)
        assert not any(home.exists() for home in homes)
    finally:
        asyncio.run(pair.stop())

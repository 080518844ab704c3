"""Fixtures that tests in several folders use.

``postgres_dsn``, the PostgreSQL server of the backend tests and of the meta-suite's
server cases: ``$CHECKPOINTSPEC_POSTGRES_DSN`` when it is set; otherwise, when
``initdb`` is installed, a throwaway cluster started for the test session by
``.ci/postgres.py`` and removed after it. Without either those tests skip, naming
the reason; with ``CI=true`` they fail instead, so CI cannot pass without having
run them. ``cluster_helper`` is ``.ci/postgres.py`` itself, for its own tests.

Plain functions the tests share are in ``helpers.py`` beside this file; fixtures
only one folder uses are in that folder's ``conftest.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

# The tests' own property tests judge answers, never speed: on a shared, loaded
# machine a timed health check or deadline fails a correct test at random.
settings.register_profile(
    "checkpointspec-tests",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("checkpointspec-tests")

QUALITY = str(Path(__file__).resolve().parent / "quality")
"""The broken backends and session layers of ``tests/quality``."""


@pytest.fixture
def broken_backends_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The modules of ``tests/quality`` (``broken_backends``, ``hard_backends``,
    ``crash_backends``, ``broken_session`` ...) can be named as ``module:function``
    to the kit, both in this process and in the processes it starts (a stdio
    server, the CLI in a subprocess, pytest run by ``pytester``), which get
    ``PYTHONPATH``."""
    monkeypatch.syspath_prepend(QUALITY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([QUALITY, *sys.path]))


DSN_VARIABLE = "CHECKPOINTSPEC_POSTGRES_DSN"
_HELPER = Path(__file__).resolve().parents[1] / ".ci" / "postgres.py"


def _cluster_helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_checkpointspec_ci_postgres", _HELPER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL server: {reason}")


@pytest.fixture(scope="session")
def cluster_helper() -> ModuleType:
    """``.ci/postgres.py`` as a module, for tests of the throwaway cluster itself; they
    skip when ``initdb`` is not installed."""
    helper = _cluster_helper()
    if helper.find_tool("initdb") is None:
        pytest.skip("initdb is not installed: no cluster to start")
    return helper


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN of a running PostgreSQL server the tests may create schemas in."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        yield dsn
        return
    if not _HELPER.exists():
        _unavailable(f"{DSN_VARIABLE} is not set and {_HELPER} is missing")
    helper = _cluster_helper()
    if helper.find_tool("initdb") is None:
        _unavailable(f"{DSN_VARIABLE} is not set and initdb is not installed")
    # Not under pytest's tmp_path: its parents are private to root, and the server
    # runs as an unprivileged user who must reach the directory.
    parent = Path(tempfile.mkdtemp(prefix=helper.STALE_PREFIX))
    parent.chmod(0o755)
    cluster = parent / "cluster"
    try:
        dsn = helper.start(cluster)
    except RuntimeError as exc:
        helper.stop(cluster)
        parent.rmdir()
        _unavailable(f"starting a throwaway cluster failed: {exc}")
    try:
        yield dsn
    finally:
        helper.stop(cluster)
        parent.rmdir()

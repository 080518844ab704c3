"""The PostgreSQL server the backend tests use: ``postgres_dsn``.

``$CHECKPOINTSPEC_POSTGRES_DSN`` when it is set; otherwise, when ``initdb`` is
installed, a throwaway cluster started for the test session by
``.ci/postgres.py`` and removed after it. Without either the PostgreSQL tests
skip, naming the reason; with ``CI=true`` they fail instead, so CI cannot pass
without having run them.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

DSN_VARIABLE = "CHECKPOINTSPEC_POSTGRES_DSN"
_HELPER = Path(__file__).resolve().parents[2] / ".ci" / "postgres.py"


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

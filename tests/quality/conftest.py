"""Make ``broken_backends`` importable as a top-level module; a PostgreSQL server for the server cases.

The kit loads a backend by ``module:function``, in this process and in the
processes it spawns (``workers > 1``, and the multi-process checks, whose
workers get this interpreter's ``sys.path`` as PYTHONPATH). Putting this
directory on ``sys.path`` here covers all of them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server for the server cases' first store: ``$CHECKPOINTSPEC_POSTGRES_DSN``,
    else a throwaway cluster for the session. The servers those cases kill and copy are
    the ones the backends launch. Without ``initdb`` they skip; with ``CI=true`` they fail."""
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    from checkpointspec.backends.postgres import DSN_ENVIRONMENT
    from checkpointspec.backends.postgres.cluster import find_tool, make_cluster

    dsn = os.environ.get(DSN_ENVIRONMENT)
    if dsn:
        yield dsn
        return
    if find_tool("initdb") is None:
        reason = f"{DSN_ENVIRONMENT} is not set and initdb is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the server cases cannot run in CI: {reason}", pytrace=False)
        pytest.skip(reason)
    server = make_cluster()
    try:
        yield server.dsn
    finally:
        server.remove()

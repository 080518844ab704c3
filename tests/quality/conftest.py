"""Make ``broken_backends`` importable as a top-level module; ``postgres_dsn`` for server cases.

The kit loads a backend by ``module:function``, in this process and in the
processes it spawns (``workers > 1``, and the multi-process checks, whose
workers get this interpreter's ``sys.path`` as PYTHONPATH). Putting this
directory on ``sys.path`` here covers all of them.

The broken PostgreSQL backends (``server_backends``) need a server: the
``postgres_dsn`` fixture of tests/backends/conftest.py, loaded from its file
(``$CHECKPOINTSPEC_POSTGRES_DSN``, else a throwaway cluster; a skip without one).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _backend_fixtures() -> object:
    path = Path(__file__).resolve().parents[1] / "backends" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_checkpointspec_backend_fixtures", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


postgres_dsn = _backend_fixtures().postgres_dsn  # type: ignore[attr-defined]

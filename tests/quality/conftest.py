"""Make ``broken_backends`` and the other broken backends importable as top-level modules.

The kit loads a backend by ``module:function``, in this process and in the
processes it spawns (``workers > 1``, and the multi-process checks, whose
workers get this interpreter's ``sys.path`` as PYTHONPATH). Putting this
directory on ``sys.path`` here covers all of them.

The broken PostgreSQL backends (``server_backends``) need a server: the
``postgres_dsn`` fixture of tests/conftest.py (``$CHECKPOINTSPEC_POSTGRES_DSN``, else
a throwaway cluster; a skip without one).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

"""The file reference backend behind a module that takes 3 s to import.

A stand-in for a backend built on a heavy library (an ORM, a cloud SDK): every
process that loads the factory pays the import again, so a kit run that starts
many worker processes pays it many times. ``bench/bench_kit.py`` runs the quick
profile on it as ``slow_import_backend:make``, with ``bench/`` on PYTHONPATH.
"""

from __future__ import annotations

import time

from checkpointspec.backends.file import make

IMPORT_SECONDS = 3.0
"""How long importing this module takes, on purpose."""

time.sleep(IMPORT_SECONDS)

__all__ = ["IMPORT_SECONDS", "make"]

"""Fixtures that tests in several folders use.

Plain functions the tests share are in ``helpers.py`` beside this file; fixtures
only one folder uses are in that folder's ``conftest.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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

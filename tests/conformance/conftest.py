"""What the CLI tests share: the check that a usage error is one line, and a kit that must not run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from checkpointspec.conformance.frontends import cli


@pytest.fixture
def one_line_error(capsys: pytest.CaptureFixture[str]) -> Callable[[], str]:
    """Call it after ``main(...)``: the text on stderr, asserted to be one line and no traceback."""

    def read() -> str:
        err = capsys.readouterr().err.strip()
        assert "\n" not in err, err
        assert "Traceback" not in err
        return err

    return read


@pytest.fixture
def kit_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Usage errors are refused before the kit runs a single check."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the kit ran despite a usage error")

    monkeypatch.setattr(cli, "run_kit", refuse)

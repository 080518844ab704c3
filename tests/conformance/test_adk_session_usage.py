"""``--adk-session-service`` without ADK: what the command line refuses, and how."""

from __future__ import annotations

import pytest
from checkpointspec.conformance.frontends.cli import main


def test_a_factory_returning_no_service_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # undeclared_sqlite:make returns a checkpointer, which has none of a service's methods.
    assert main(["run", "--adk-session-service", "undeclared_sqlite:make", "-q"]) == 2
    err = capsys.readouterr().err
    assert "is not an ADK BaseSessionService" in err
    assert "create_session" in err


def test_a_service_declares_only_what_the_suite_knows(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["run", "--adk-session-service", "undeclared_sqlite:make", "--declare", "codec"]) == 2
    )
    assert "not declarable for an ADK session service" in capsys.readouterr().err

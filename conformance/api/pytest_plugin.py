"""The pytest plugin: ``pytest --checkpointer module:function`` runs the kit's checks
as test items inside a backend author's own suite (xdist-compatible).

Registered through the ``pytest11`` entry point, so installing checkpointspec is
enough. Without ``--checkpointer`` it adds nothing to a run. Each check becomes one
item named after its rule (``checkpointspec[BACKEND]::APPEND-002::stale_...``); a
failure shows the violated rule, the minimal failing steps and a replay command.

The check runs in the item's setup, so that its outcome maps onto pytest's: a
rule violation (or an exception the backend raised) is a test failure; an error
of the kit itself is a pytest *error*, which says the test could not be run, not
that the backend is wrong; skipped and not checked checks are skips.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..checks.base import Check
from ..checks.profiles import PROFILES
from ..engines.loading import BackendLoadError, BackendRef, parse_options, resolve_backend
from .registry import select_checks
from .report import CheckResult
from .runner import BackendProbe, probe_backend, run_check

__all__ = ["CheckItem", "KitCollector"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("checkpointspec", "checkpointer conformance kit")
    group.addoption(
        "--checkpointer",
        metavar="BACKEND",
        help="run the kit against BACKEND (memory, file, sqlite or module:function)",
    )
    group.addoption(
        "--checkpointer-profile",
        choices=sorted(PROFILES),
        default="quick",
        help="kit profile (default: quick)",
    )
    group.addoption(
        "--checkpointer-seed", type=int, default=None, help="seed for the kit's random choices"
    )
    group.addoption(
        "--checkpointer-only",
        action="append",
        default=[],
        metavar="CHECK_OR_RULE",
        help="run only these checks or rules",
    )
    group.addoption(
        "--checkpointer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (repeatable)",
    )


class CheckFailed(Exception):
    """A check found a rule violation; carries the kit's result for the report."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.detail)
        self.result = result


class KitCollector(pytest.Collector):
    """Collects one item per kit check for the configured backend."""

    def __init__(
        self, *, backend: BackendRef, probe: BackendProbe, seed: int, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.backend = backend
        self.probe = probe
        self.seed = seed

    def collect(self) -> Iterator[CheckItem]:
        only = self.config.getoption("checkpointer_only")
        for kit_check in select_checks(only):
            yield CheckItem.from_parent(self, name=kit_check.name, kit_check=kit_check)


class CheckItem(pytest.Item):
    """One kit check run as a pytest test."""

    def __init__(self, *, kit_check: Check, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.kit_check = kit_check
        self.result: CheckResult | None = None
        for rule_id in kit_check.rules:
            self.add_marker(pytest.mark.checkpointspec_rule(rule_id))

    def setup(self) -> None:
        # pytest reports an exception raised in setup as an error and one raised in
        # runtest as a failure: running the check here lets only evidence against
        # the backend fail the test.
        parent = self.parent
        assert isinstance(parent, KitCollector)
        options = _options(self.config.getoption("checkpointer_option"))
        profile = PROFILES[self.config.getoption("checkpointer_profile")]
        with tempfile.TemporaryDirectory(prefix="checkpointspec-") as root:
            result = self.result = run_check(
                self.kit_check,
                parent.backend,
                parent.probe,
                profile,
                parent.seed,
                Path(root),
                options,
            )
        if result.status == "error":
            pytest.fail(
                f"kit error, not evidence against the backend: {result.reason}\n"
                f"{result.detail}\nreplay: {result.replay}",
                pytrace=False,
            )
        if result.status == "skipped":
            pytest.skip(result.reason)
        if result.status == "not_checked":
            pytest.skip(f"not checked: {result.reason}")

    def runtest(self) -> None:
        if self.result is not None and self.result.status == "failed":
            raise CheckFailed(self.result)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: object = None
    ) -> str:
        if isinstance(excinfo.value, CheckFailed):
            result = excinfo.value.result
            return f"rule {result.violated_rule} violated\n{result.detail}\nreplay: {result.replay}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.kit_check.name}: {self.kit_check.summary}"


def _options(pairs: list[str]) -> dict[str, str]:
    try:
        return parse_options(pairs)
    except BackendLoadError as exc:
        raise pytest.UsageError(f"--checkpointer-option: {exc}") from exc


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "checkpointspec_rule(rule_id): the kit rule a check verifies"
    )


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    name = config.getoption("checkpointer")
    if not name:
        return
    try:
        backend = resolve_backend(name)
        probe = probe_backend(backend, _options(config.getoption("checkpointer_option")))
    except BackendLoadError as exc:
        raise pytest.UsageError(f"--checkpointer: {exc}") from exc
    seed = config.getoption("checkpointer_seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    collector = KitCollector.from_parent(
        session, name=f"checkpointspec[{name}]", backend=backend, probe=probe, seed=seed
    )
    items.extend(collector.collect())


def pytest_report_header(config: pytest.Config) -> str | None:
    name = config.getoption("checkpointer")
    if not name:
        return None
    return f"checkpointspec: backend {name}, profile {config.getoption('checkpointer_profile')}"

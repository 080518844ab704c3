"""What a check gets: a fresh store directory, handles on it, and helpers.

A harness is made of the run (`checkpointspec.conformance.engines.run.kit_run.KitRun`,
handed down whole) and the check's own directory; what the check reads of the
run (backend, capabilities, profile, seed, options) it reads through it. The
backend under test is `Harness.target`, a `BackendTarget` taken from the run
once: the check hands it whole to worker processes, machines and children.

Each check runs against its own empty directory. `Harness.open` makes a handle
through the backend's factory (the same path reopens the same store) and keeps
track of it so that the runner can close whatever a failing check left open.
Handles come as `checkpointspec.conformance.engines.target.provenance.BackendHandle`:
every exception the backend raises through them is noted as the backend's, which
is how the runner tells evidence against the backend from the kit's own errors.

Session checks reach the session layer under test through `Harness.session`,
loaded on first use from `Harness.session_target` (``--session-layer``; by
default ``checkpointspec.reference``), never by importing it themselves.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from ....backends.registry import BackendTarget
from ....spec import (
    BackendContext,
    BackendFactory,
    Capability,
    Checkpointer,
    Codec,
    SessionLayer,
    UserPrompt,
)
from ..contract.outcomes import read_all
from ..contract.violations import RuleViolation, RuleWarning
from ..search.budget import Allowance, Slice
from ..search.exploration import Explored, Found
from ..search.replay import Replay
from ..target.fault_codecs import SealedCodec
from ..target.provenance import open_checkpointer
from ..target.session_layer import load_session_layer
from ..target.witness import Witness, note_divergence
from .kit_run import KitRun
from .profiles import Profile

__all__ = ["CheckSkipped", "Harness", "NothingExercised", "read_all"]


def _works_as_written(codec: Codec | None) -> bool:
    """Whether a handle with ``codec`` reads back what the model predicts: no codec of the
    check's own, or a sealing codec with the key every handle of the check uses. Any
    other (one that fails, corrupts, or holds another key) makes errors the model
    cannot know of."""
    return codec is None or (type(codec) is SealedCodec and codec.name == SealedCodec().name)


class CheckSkipped(Exception):
    """Raised by a check that finds nothing to verify on this backend; the message says why."""


class NothingExercised(Exception):
    """Raised by a check whose fault never happened (no connection cut, no writer held,
    no crash state checked): it proves nothing, so it is ``not_checked``, never passed;
    the message says what did not happen and why."""


class Harness:
    """The environment of one check run: the run's settings (``run``) and a directory."""

    def __init__(self, run: KitRun, root: Path, allowance: Allowance | None = None) -> None:
        self.run = run
        """The run this check belongs to, as the front end built it."""
        self.root = root
        """The check's own directory: every store it makes is under it."""
        self._target: BackendTarget = run.target
        self._factory: BackendFactory = self._target.factory()
        self.witness = Witness(run.probe.capabilities)
        """Judges every call made through the handles `open` returns against the model,
        and keeps the first that diverges (`checkpointspec.conformance.engines.target.witness`)."""
        self.replay = Replay(run.reproduction) if run.reproduction is not None else None
        """With ``--reproduce``: the recorded example the check's Hypothesis run replays
        instead of searching (`checkpointspec.conformance.engines.search.replay`)."""
        self._session: SessionLayer | None = None
        self.warnings: list[RuleWarning] = []
        """The SHOULD rules the check saw not met, each once (`warn`); they fail nothing."""
        self.findings: list[Found] = []
        """Violations the check recorded and explored past (`record`, `explore`); the
        runner reports each, and the one the check ended on if any."""
        self.explored: Explored | None = None
        """How the check's Hypothesis runs explored (None: it made none)."""
        self.measured: list[str] = []
        """What a passing check reports it covered (how many crash states); see `measure`."""
        self.kit_checked: dict[str, str] = {}
        """The rules whose verdict in this check is the kit's own, not the backend's,
        with why (see `judged_on_the_kit_side`); empty when the backend answered."""
        self._handles: list[Checkpointer] = []
        self.specimen: Checkpointer | None = None
        """The first handle the check opened (closed by the end): the kit calls the
        backend's `ExternalStorage.drop_stores` on it."""
        self._counter = itertools.count()
        self.slice = Slice.of(allowance)
        """What the check may take of the run's time cap (``allowance``; None: no cap):
        its loops stop starting work when the cap is reached, which makes the check
        incomplete (`checkpointspec.conformance.engines.search.budget`)."""
        self.path = self.new_store()

    @property
    def target(self) -> BackendTarget:
        """The backend under test, with the run's options: what every handle, worker
        process, machine and child of this check opens. What a check hands it to
        writes where the witness cannot see, so from then on it judges nothing."""
        self.witness.lose_all("the check handed the backend to a worker, machine or child")
        return self._target

    @property
    def factory(self) -> BackendFactory:
        """The backend's factory, for a check that opens a handle itself (the witness then
        judges nothing more, as for `target`)."""
        self.witness.lose_all("the check opened a handle around the harness")
        return self._factory

    def begin_example(self) -> None:
        """A Hypothesis example starts: the witness's first divergence is its own."""
        self.witness.begin_example()

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the backend declares."""
        return self.run.probe.capabilities

    @property
    def profile(self) -> Profile:
        """The run's budgets."""
        return self.run.profile

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def options(self) -> dict[str, str]:
        """What the factory gets in `BackendContext.options` (also in worker processes)."""
        return self._target.options

    @property
    def session_target(self) -> str:
        """The session layer's name (``MODULE`` or ``MODULE:OBJECT``), for worker processes."""
        return self.run.session_layer

    def new_store(self) -> Path:
        """A fresh, empty directory for one more store."""
        path = self.root / f"store-{next(self._counter)}"
        path.mkdir(parents=True)
        return path

    def discard_store(self, path: Path) -> None:
        """Remove the directory of a store this check is done with. A backend keeping its
        stores' data elsewhere (a database server) keeps the directory until the check
        ends: the run then drops what each of the check's store directories names
        (`checkpointspec.spec.ExternalStorage`, `checkpointspec.spec.DropsStores`)."""
        if not self.run.probe.external_storage:
            shutil.rmtree(path, ignore_errors=True)

    @property
    def session(self) -> SessionLayer:
        """The session layer under test, loaded on first use (a storage check never loads it).

        Raises `checkpointspec.conformance.engines.target.session_layer.SessionLayerError`
        when it cannot be loaded; the runner loads it once before any session check
        runs, so a check meets that only if the layer changed in between.
        """
        if self._session is None:
            self._session = load_session_layer(self.session_target)
        return self._session

    @session.setter
    def session(self, layer: SessionLayer) -> None:
        """Give the harness a session layer loaded elsewhere (a test driving one check)."""
        self._session = layer

    def context(
        self,
        path: Path | None = None,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> BackendContext:
        """The BackendContext for ``path`` (default: this check's store); ``options`` are
        added to the run's (a launched server's address, `ServerControl.options`). A
        context handed out lets a check open a handle the witness does not see: from
        then on it judges nothing."""
        self.witness.lose_all("the check took a BackendContext to open a handle itself")
        return self._context(path, codec, options)

    def _context(
        self,
        path: Path | None = None,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> BackendContext:
        return self._target.context(path or self.path, codec=codec, options=options)

    async def open(
        self,
        path: Path | None = None,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> Checkpointer:
        """Open one more handle on the store at ``path`` (default: this check's store),
        with ``options`` added to the run's."""
        where = path or self.path
        cp = await open_checkpointer(
            self._factory,
            self._context(path, codec, options),
            self.witness,
            own_codec=not _works_as_written(codec) or bool(options),
            fresh=not where.exists() or not any(where.iterdir()),
        )
        self._handles.append(cp)
        if self.specimen is None:
            self.specimen = cp
        return cp

    @contextlib.asynccontextmanager
    async def opened(
        self,
        path: Path | None = None,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Checkpointer]:
        """A handle that is closed when the block ends."""
        cp = await self.open(path, codec, options)
        try:
            yield cp
        finally:
            await cp.close()

    def warn(self, rule_id: str, message: str) -> None:
        """Record that a SHOULD rule is not met, without failing the check."""
        warning = RuleWarning(rule_id, message)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def record(self, violation: RuleViolation) -> None:
        """Record ``violation`` and go on checking: for a check that looks at many
        independent cases (crash states, held writers) and reports every rule they
        break, each once (a rule's distinct divergence shapes each once), rather than
        stopping at the first."""
        key = (violation.rule_id, violation.shape)
        if all((f.violation.rule_id, f.violation.shape) != key for f in self.findings):
            note_divergence(violation, self.witness.first)
            self.findings.append(Found(violation, violation))

    def found(self, rule_id: str) -> bool:
        """Whether the check has recorded a violation of ``rule_id`` already."""
        return any(f.violation.rule_id == rule_id for f in self.findings)

    def measure(self, text: str) -> None:
        """Say how much a check covered (``"checked 200 crash states"``): the detail of its pass."""
        self.measured.append(text)

    def judged_on_the_kit_side(self, *rule_ids: str) -> None:
        """Say that this check verifies ``rule_ids`` only through cases a proxy may refuse
        or answer before the backend behind it is asked. Those the backend under test is
        such a proxy for (`checkpointspec.spec.RefusesBeforeTheBackend`, e.g. the stdio
        client for ARG-003, or for CLOSE-001 when the lite-agent bridge answers close
        itself) are then reported checked by the kit, not the backend, and their pass
        here is not counted as the backend's."""
        refused = self.run.probe.refused_before_the_backend
        for rule_id in rule_ids:
            if rule_id in refused:
                self.kit_checked[rule_id] = refused[rule_id]

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    async def close_all(self) -> None:
        """Close every handle this harness opened (close is idempotent, CLOSE-001)."""
        for cp in self._handles:
            with contextlib.suppress(Exception):
                await cp.close()
        self._handles.clear()

    @staticmethod
    def prompt(text: str) -> UserPrompt:
        """A small event; checks use unique texts so every event is recognisable."""
        return UserPrompt(text)

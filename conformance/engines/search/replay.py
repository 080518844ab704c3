"""Exact replay of the kit's Hypothesis runs: by the seed alone, or by a reproduce blob.

Every property check and state machine of the kit runs through `replayable`,
`kit_settings` and `run_exactly`, so that:

- ``--seed N`` gives the same sequence of examples on every machine and checkout
  with the same versions of the kit and of Hypothesis: no example database
  (``database=None``), no profile of the user's filling in a setting the kit
  leaves open (every setting that shapes generation is given), and none of the
  constants Hypothesis collects from "local" modules (`exact_generation`);
- a failing run carries its reproduce blob (Hypothesis' encoded choice
  sequence, `reproduction_of`), and ``--reproduce BLOB`` replays exactly that
  example: no search, no shrinking, no database.

A blob is written ``HYPOTHESIS_VERSION:BASE64`` (`Reproduction`): Hypothesis
decodes a choice sequence only under the version that encoded it, so the kit
names the version to install rather than letting a mismatch surface mid-run.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import hypothesis
import msgspec
from hypothesis import HealthCheck, Phase, Verbosity, reproduce_failure, seed, settings
from hypothesis.errors import DidNotReproduce, InvalidArgument
from hypothesis.reporting import with_reporter

__all__ = [
    "HYPOTHESIS_VERSION",
    "REPORTING_PHASES",
    "SEARCH_PHASES",
    "Replay",
    "ReplayPassed",
    "ReproduceError",
    "Reproduction",
    "exact_generation",
    "kit_settings",
    "parse_reproduction",
    "replayable",
    "reproduction_of",
    "run_exactly",
]

F = TypeVar("F", bound=Callable[..., object])

HYPOTHESIS_VERSION: str = hypothesis.__version__
"""The installed Hypothesis: a blob replays only under the version that recorded it."""

REPORTING_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
"""Every phase but ``Phase.explain``, whose report ("these lines were always and only
run by failing test cases: ...") points at the kit's code, not the backend's."""

SEARCH_PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
"""The phases of a run reported as found, unshrunk (every replay of it is costly)."""


class ReproduceError(ValueError):
    """A ``--reproduce`` value the kit cannot replay; the message is one line saying why."""


class Reproduction(msgspec.Struct, frozen=True):
    """A recorded failing example: the Hypothesis version and its base64 choice sequence."""

    version: str
    blob: str

    def __str__(self) -> str:
        return f"{self.version}:{self.blob}"


def parse_reproduction(text: str) -> Reproduction:
    """``HYPOTHESIS_VERSION:BASE64`` as a `Reproduction`, checked before any check runs.

    Raises `ReproduceError` for text of another form, a blob that does not decode to
    a choice sequence, or one recorded under another Hypothesis version than the
    installed one (the message names the version to install).
    """
    version, sep, blob = text.strip().partition(":")
    if not sep or not version or not blob:
        raise ReproduceError(
            f"{text!r} is not a reproduce blob: expected HYPOTHESIS_VERSION:BASE64, "
            "as a failure's replay command gives it"
        )
    # Only the version that encoded a choice sequence can decode it.
    if version != HYPOTHESIS_VERSION:
        raise ReproduceError(
            f"the reproduce blob was recorded with Hypothesis {version}, this environment "
            f"has {HYPOTHESIS_VERSION}: install hypothesis=={version} to replay it"
        )
    try:
        # decode_failure takes anything base64.b64decode forgives; the kit takes only
        # what encode_failure writes, so a typo is caught here and not mid-replay.
        base64.b64decode(blob, validate=True)
        hypothesis.core.decode_failure(blob.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, InvalidArgument, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReproduceError(f"the reproduce blob does not decode: {reason}") from None
    return Reproduction(version, blob)


_DECORATOR = re.compile(r"@reproduce_failure\('(?P<version>[^']+)', b'(?P<blob>[A-Za-z0-9+/=]+)'\)")
"""How Hypothesis prints a failing example's blob (``print_blob=True``), in every
version since the blob was introduced: the public decorator that replays it."""


def linked_exceptions(exc: BaseException) -> Iterable[BaseException]:
    """``exc``, the exceptions of every group inside it, and their causes and contexts,
    each once: where Hypothesis hangs its notes and the backend's error may hide."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def _notes(exc: BaseException) -> Iterable[str]:
    for current in linked_exceptions(exc):
        yield from (str(n) for n in getattr(current, "__notes__", None) or ())


def reproduction_of(exc: BaseException) -> Reproduction | None:
    """The blob Hypothesis attached to the failure ``exc`` (or to a group or cause
    around it), if a kit run raised it; None for a failure outside Hypothesis."""
    for note in _notes(exc):
        found = _DECORATOR.search(note)
        if found is not None:
            return Reproduction(found["version"], found["blob"])
    return None


def kit_settings(
    *, max_examples: int, phases: Sequence[Phase], stateful_step_count: int = 50
) -> settings:
    """Settings for one kit run: every one that shapes which examples run is given, so a
    Hypothesis profile the user loaded (a database, derandomize, another backend) does
    not change them; no deadline and no health checks (the backend's speed is not the
    question); one bug reported; the blob printed, for `reproduction_of` to take (the
    panel drops Hypothesis' advice around it). ``stateful_step_count`` (Hypothesis'
    default when not given) matters to state machines only."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=stateful_step_count,
        phases=phases,
        database=None,
        derandomize=False,
        backend="hypothesis",
        deadline=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.normal,
    )


def replayable(target: F, run_seed: int, reproduction: Reproduction | None) -> F:
    """``target`` (a ``@given`` test, or a state machine factory) set to run under
    ``run_seed``, or to replay ``reproduction`` alone."""
    if reproduction is None:
        return seed(run_seed)(target)
    return reproduce_failure(reproduction.version, reproduction.blob.encode("ascii"))(target)


@contextlib.contextmanager
def exact_generation() -> Iterator[None]:
    """While open, Hypothesis draws no constants from the modules loaded in this process.

    Since 6.131 Hypothesis collects the literals of every loaded module outside the
    standard library and site-packages (the backend under test, an editable install
    of the kit, a conftest) and mixes them into generation: the same seed then gives
    other examples in another checkout or with another module imported. No setting
    turns that off. The narrowest way is the one function the provider asks for
    those constants, ``providers._get_local_constants``: this swaps it for an empty
    set for the kit's runs only (a user's own tests in the same pytest session keep
    theirs), and clears the provider's cache of constants on the way in and out,
    since it holds the collected ones. A Hypothesis without that function collects
    nothing, and this does nothing.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without that module
        yield
        return
    collect = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if collect is None:
        yield
        return
    from hypothesis.internal.constants_ast import Constants

    none = Constants()

    def clear() -> None:
        inner = getattr(cache, "cache", None)
        if inner is not None:
            inner.clear()

    providers._get_local_constants = lambda: none
    clear()
    try:
        yield
    finally:
        providers._get_local_constants = collect
        clear()


class ReplayPassed(Exception):
    """The recorded example did not fail when replayed.

    Either the backend now passes it (the replay of a state machine then runs out
    of recorded steps where the failure was), or the blob was recorded for another
    check, backend or profile: Hypothesis cannot tell these apart, so neither can
    the kit.
    """


class Replay(msgspec.Struct):
    """A check's use of ``--reproduce``: the example to replay, and whether a Hypothesis
    run of the check took it (a check that runs none cannot replay a blob)."""

    reproduction: Reproduction
    used: bool = False


def run_exactly(run: Callable[[], None], replay: Replay | None) -> None:
    """Call ``run`` (a Hypothesis test made by `replayable`) with `exact_generation`.

    Replaying (``replay`` given), the failing steps Hypothesis prints are attached
    to the failure as a note, as a search attaches them, instead of going to
    stdout; a replay that does not fail raises `ReplayPassed`.
    """
    with exact_generation():
        if replay is None:
            run()
            return
        replay.used = True
        printed: list[str] = []
        try:
            with with_reporter(lambda text: printed.append(str(text))):
                run()
        except DidNotReproduce as exc:
            raise ReplayPassed(str(exc)) from None
        except BaseException as exc:
            if printed:
                exc.add_note("\n".join(printed))
            raise

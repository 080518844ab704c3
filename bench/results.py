"""What the benchmarks share to report: a result row, the table they print, paired
baseline runs, and the progress line of each measurement.

A benchmark builds a list of `Row`s and returns `print_rows(rows)` as its exit
status: 0 when every row meets its target.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import NamedTuple, TypeVar

T = TypeVar("T")


class Row(NamedTuple):
    """One line of the result table."""

    name: str
    value: str
    ratio: float | None
    target: str
    ok: bool


def print_rows(rows: list[Row]) -> int:
    """Print ``rows`` as a table; 0 when every row is ``ok``, else 1."""
    width = max(len(row.name) for row in rows)
    target = max(len(row.target) for row in rows)
    print(f"{'measurement':<{width}}  {'rate':>12}  {'ratio':>7}  {'target':<{target}} ok")
    for row in rows:
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
        verdict = "yes" if row.ok else "NO"
        print(f"{row.name:<{width}}  {row.value:>12}  {ratio:>7}  {row.target:<{target}} {verdict}")
    return 0 if all(row.ok for row in rows) else 1


def timed(label: str, fn: Callable[[], T]) -> T:
    """Run ``fn``, saying on stderr which measurement is running."""
    print(f"  {label} ...", file=sys.stderr, flush=True)
    return fn()


def alternate(rounds: int, *runs: Callable[[int], float]) -> list[list[float]]:
    """Each run's results over ``rounds`` rounds, run in turn so drift hits all alike."""
    results: list[list[float]] = [[] for _ in runs]
    for r in range(rounds):
        for run, out in zip(runs, results, strict=True):
            out.append(run(r))
    return results


def paired(
    rounds: int, baseline: Callable[[int], float], measured: Callable[[int], float]
) -> tuple[float, float, float]:
    """Median baseline rate, median measured rate, median of the per-round ratios.

    Each round runs the two back to back, so a burst of load from elsewhere on
    the machine hits both sides of that round's ratio.
    """
    base, ours = alternate(rounds, baseline, measured)
    ratios = [m / b for b, m in zip(base, ours, strict=True)]
    return statistics.median(base), statistics.median(ours), statistics.median(ratios)


def flatness_rows(big: int, append_ratio: float, read_ratio: float) -> list[Row]:
    """The rows saying whether append and read-since cost stay flat as a log grows."""
    return [
        Row(f"append cost, {big:,} vs 10 events", "", append_ratio, "<= 1.2x", append_ratio <= 1.2),
        Row(f"read-since cost, {big:,} vs 10 events", "", read_ratio, "<= 1.2x", read_ratio <= 1.2),
    ]

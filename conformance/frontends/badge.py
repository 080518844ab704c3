"""A status badge for a run (``--badge FILE.svg``): one self-contained SVG, no network.

The badge is shields.io's "flat" style, written out here so that drawing it
needs no service and no dependency. It reads "checkpointspec" on the left and
on the right:

- green, the attained levels joined by ``+`` (``base+truncate+durable``), when
  the run passed (exit status 0) with no rule xfailed; ``passed`` when it
  attained no level (a run narrowed with ``--only``);
- yellow, the same followed by ``· N xfailed`` when it passed with rules listed
  as expected failures that failed;
- red, ``failing: N rules`` when it failed (exit status 1): N counts the rules
  that failed or passed against their ``--xfail``;
- grey, ``kit error`` when the kit broke off a check (exit status 3);
- grey, ``incomplete`` when the time cap stopped a check before its counts (exit
  status 4).

Text widths come from a table of Verdana's advance widths at 11 px (the font
the badge names first); a glyph missing from it counts as wide, so a badge may
come out a little wide, never clipped.
"""

from __future__ import annotations

from typing import Final
from xml.sax.saxutils import escape, quoteattr

import msgspec

from ..running.levels import attained
from ..running.report import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_PASSED, KitReport

__all__ = ["Badge", "badge_for", "render_badge"]

GREEN: Final = "#4c1"
YELLOW: Final = "#dfb317"
RED: Final = "#e05d44"
GREY: Final = "#9f9f9f"
_LABEL_FILL: Final = "#555"


class Badge(msgspec.Struct, frozen=True):
    """What a badge says: the left text, the right text and the right side's colour."""

    label: str
    message: str
    color: str


def badge_for(report: KitReport, label: str = "checkpointspec") -> Badge:
    """The badge of a run (see the module docstring)."""
    if report.exit_status == EXIT_FAILED:
        failing = sum(r.status in ("failed", "xpassed") for r in report.rules)
        return Badge(label, f"failing: {failing} rule{'' if failing == 1 else 's'}", RED)
    if report.exit_status == EXIT_INCOMPLETE:
        return Badge(label, "incomplete", GREY)
    if report.exit_status != EXIT_PASSED:
        return Badge(label, "kit error", GREY)
    message = "+".join(attained(report.levels)) or "passed"
    xfailed = sum(r.status == "xfailed" for r in report.rules)
    if xfailed:
        return Badge(label, f"{message} · {xfailed} xfailed", YELLOW)
    return Badge(label, message, GREEN)


_WIDTHS: Final[dict[str, float]] = {
    " ": 3.9, "!": 4.3, "(": 5.0, ")": 5.0, "+": 8.4, ",": 3.6, "-": 4.8, ".": 3.6,
    "/": 4.8, ":": 4.8, "_": 6.8, "·": 3.6,
    **dict.fromkeys("0123456789", 7.0),
    "a": 6.7, "b": 6.8, "c": 5.8, "d": 6.8, "e": 6.6, "f": 3.8, "g": 6.8, "h": 6.9,
    "i": 3.0, "j": 3.8, "k": 6.5, "l": 3.0, "m": 10.6, "n": 6.9, "o": 6.6, "p": 6.8,
    "q": 6.8, "r": 4.6, "s": 5.7, "t": 4.3, "u": 6.9, "v": 6.5, "w": 8.9, "x": 6.5,
    "y": 6.5, "z": 5.7,
}  # fmt: skip
_WIDE: Final = 11.0
"""A glyph not in the table: as wide as Verdana's widest (``W``, ``M``), so text never overflows."""


def text_width(text: str) -> float:
    """The width of ``text`` in Verdana 11 px, in pixels (upper case counts as wide)."""
    return sum(_WIDTHS.get(ch, 8.0 if ch.isupper() else _WIDE) for ch in text)


def render_badge(badge: Badge) -> str:
    """The SVG text of ``badge``."""
    left = round(text_width(badge.label) + 10)
    right = round(text_width(badge.message) + 10)
    width = left + right
    title = f"{badge.label}: {badge.message}"
    label, message = escape(badge.label), escape(badge.message)
    lx, rx = left / 2, left + right / 2

    def text(x: float, value: str) -> str:
        return (
            f'<text x="{x:g}" y="15" fill="#010101" fill-opacity=".3">{value}</text>'
            f'<text x="{x:g}" y="14">{value}</text>'
        )

    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f"aria-label={quoteattr(title)}>"
        f"<title>{escape(title)}</title>"
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{left}" height="20" fill="{_LABEL_FILL}"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{badge.color}"/>'
        f'<rect width="{width}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" '
        'font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">'
        f"{text(lx, label)}{text(rx, message)}</g></svg>\n"
    )

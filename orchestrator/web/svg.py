"""A stage's score curve as inline SVG, drawn on the server (no JavaScript).

It shows what no general plot does: the pass threshold the verdicts had to
reach, the plateau window the rule looks at (the last `patience` scored
attempts of the current run), and where the task halted. Every attempt is a
point: one without a score (a worker error, a crash, an invalid verdict) is a
grey cross on the bottom line, its outcome in its title, so a stage whose
attempts all failed still shows them. Every value is formatted by us and
every text escaped, so the markup is safe to inline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

# Narrow enough that a phone shrinks the text little; the legend wraps.
WIDTH, PLOT_HEIGHT = 520, 170
LEFT, RIGHT, BOTTOM = 52, 16, 44
FONT, CHAR, LEGEND_ROW = 13, 7.2, 20  # CHAR: an average character's width at FONT
PASSED, FAILED, UNSCORED, THRESHOLD, HALT = "#16a34a", "#2563eb", "#6b7280", "#15803d", "#dc2626"
BEST, RESTORED = "#d97706", "#7c3aed"
MAX_TICKS = 10


@dataclass(frozen=True)
class Point:
    number: int  # attempt number
    score: float | None  # None: the attempt has no score (its outcome says why)
    passed: bool
    run: int
    outcome: str = ""
    best: bool = False  # the best score of its run
    restored: bool = False  # its kept work was put back on the branch


def score_curve(
    points: Sequence[Point],
    *,
    pass_score: float | None,
    patience: int | None,
    current_run: int | None,
    halted_at: int | None = None,
    halt_reason: str | None = None,
    title: str = "",
) -> str:
    if not points:
        return ""
    numbers = [p.number for p in points]
    # Half an attempt of room on either side: a single attempt sits in the
    # middle, and no axis runs to an attempt that never was.
    low_x, high_x = min(numbers) - 0.5, max(numbers) + 0.5
    scores = [p.score for p in points if p.score is not None]
    low_y, high_y = min(0.0, *scores), max(1.0, *scores)
    # A threshold at (or under) the bottom of the scale passes every score:
    # drawn, it would only lie on the axis.
    threshold = pass_score if pass_score is not None and pass_score > low_y else None
    if threshold is not None:
        high_y = max(high_y, threshold)

    window = _window(points, patience, current_run)
    legend, rows = _legend(points, threshold, bool(window), halted_at is not None)
    top = 14 + rows * LEGEND_ROW
    height = top + PLOT_HEIGHT + BOTTOM
    bottom = height - BOTTOM

    def x(n: float) -> float:
        return LEFT + (n - low_x) / (high_x - low_x) * (WIDTH - LEFT - RIGHT)

    def y(v: float) -> float:
        return top + (high_y - v) / (high_y - low_y) * PLOT_HEIGHT

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title or "score curve")}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fff"/>',
    ]
    if window:
        x0, x1 = x(window[0]) - 6, x(window[-1]) + 6
        parts.append(
            f'<rect class="plateau-window" x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" '
            f'height="{PLOT_HEIGHT}" fill="#fde68a" fill-opacity="0.5">'
            f"<title>plateau window: the last {patience} scored attempts</title></rect>"
        )
    parts.append(_axes(x, y, (min(numbers), max(numbers)), (low_y, high_y), (top, bottom)))
    if threshold is not None:
        parts.append(
            f'<line class="pass-threshold" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
            f'y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" stroke="{THRESHOLD}" '
            f'stroke-dasharray="6 4"/>'
            f'<text x="{WIDTH - RIGHT}" y="{y(threshold) - 4:.1f}" text-anchor="end" '
            f'font-size="{FONT}" fill="{THRESHOLD}">pass {threshold:g}</text>'
        )
    scored = [p for p in points if p.score is not None]
    if len(scored) > 1:
        line = " ".join(f"{x(p.number):.1f},{y(p.score or 0):.1f}" for p in scored)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{FAILED}" stroke-width="2"/>')
    for p in points:
        parts.append(_point(p, x(p.number), y(p.score if p.score is not None else low_y)))
        parts.append(_marks(p, x(p.number), y(p.score if p.score is not None else low_y)))
    if halted_at is not None:
        hx = x(halted_at)
        label = escape(f"halted: {halt_reason}" if halt_reason else "halted")
        parts.append(
            f'<line class="halt-point" x1="{hx:.1f}" x2="{hx:.1f}" y1="{top}" '
            f'y2="{bottom}" stroke="{HALT}" stroke-width="2"/>'
            f'<text x="{hx - 4:.1f}" y="{top + 14}" text-anchor="end" font-size="{FONT}" '
            f'fill="{HALT}">{label}</text>'
        )
    parts.append(legend)
    parts.append("</svg>")
    return "".join(parts)


def _point(p: Point, cx: float, cy: float) -> str:
    outcome = escape(p.outcome or "no score")
    if p.score is None:
        # A cross, not a dot: "no score" must not read as a score of 0.
        return (
            f'<path class="unscored" data-attempt="{p.number}" data-outcome="{outcome}" '
            f'd="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
            f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}" stroke="{UNSCORED}" '
            f'stroke-width="2.5"><title>attempt {p.number}: {outcome}, no score</title></path>'
        )
    colour = PASSED if p.passed else FAILED
    return (
        f'<circle class="score" data-attempt="{p.number}" data-score="{p.score:g}" '
        f'cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" fill="{colour}">'
        f"<title>attempt {p.number}: {outcome}, score {p.score:g}</title></circle>"
    )


def _marks(p: Point, cx: float, cy: float) -> str:
    """A ring round the best point, a square round the restored one."""
    out = ""
    if p.best:
        out += (
            f'<circle class="best" data-attempt="{p.number}" cx="{cx:.1f}" cy="{cy:.1f}" '
            f'r="8" fill="none" stroke="{BEST}" stroke-width="2">'
            f"<title>attempt {p.number}: the best score of its run</title></circle>"
        )
    if p.restored:
        out += (
            f'<rect class="restored" data-attempt="{p.number}" x="{cx - 11:.1f}" '
            f'y="{cy - 11:.1f}" width="22" height="22" fill="none" stroke="{RESTORED}" '
            f'stroke-width="2"><title>attempt {p.number}: its work was restored</title></rect>'
        )
    return out


def _window(points: Sequence[Point], patience: int | None, run: int | None) -> list[int]:
    if not patience or run is None:
        return []
    current = [p.number for p in points if p.run == run and p.score is not None]
    return current[-patience:] if len(current) > patience else []


def _axes(
    x: Callable[[float], float],
    y: Callable[[float], float],
    attempts: tuple[int, int],
    scale: tuple[float, float],
    plot: tuple[float, float],
) -> str:
    (first, last), (low_y, high_y), (top, bottom) = attempts, scale, plot
    right = WIDTH - RIGHT
    out = [
        f'<line x1="{LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#6b7280"/>',
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}" stroke="#6b7280"/>',
    ]
    for value in (low_y, (low_y + high_y) / 2, high_y):
        out.append(
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="{FONT}" '
            f'fill="#374151">{value:g}</text>'
        )
    # Whole attempts only, at most MAX_TICKS of them, the last one included.
    step = max(1, -(-(last - first + 1) // MAX_TICKS))
    ticks = list(range(first, last + 1, step))
    if ticks[-1] != last and x(last) - x(ticks[-1]) > 20:
        ticks.append(last)
    for n in ticks:
        out.append(
            f'<line class="x-tick" x1="{x(n):.1f}" x2="{x(n):.1f}" y1="{bottom}" '
            f'y2="{bottom + 4}" stroke="#6b7280"/>'
            f'<text class="x-tick" x="{x(n):.1f}" y="{bottom + 16}" text-anchor="middle" '
            f'font-size="{FONT}" fill="#374151">{n}</text>'
        )
    middle = top + (bottom - top) / 2
    out.append(
        f'<text class="axis-title" x="{LEFT + (right - LEFT) / 2:.1f}" y="{bottom + 36}" '
        f'text-anchor="middle" font-size="{FONT}" fill="#111827">attempt</text>'
        f'<text class="axis-title" x="14" y="{middle:.1f}" text-anchor="middle" '
        f'font-size="{FONT}" fill="#111827" transform="rotate(-90 14 {middle:.1f})">score</text>'
    )
    return "".join(out)


def _legend(
    points: Sequence[Point], threshold: float | None, window: bool, halted: bool
) -> tuple[str, int]:
    """Only what this curve draws, above the plot, in as many rows as it
    takes; returns the markup and the number of rows."""
    items: list[tuple[str, str]] = []
    if any(p.score is not None and p.passed for p in points):
        items.append(("passed", f'<circle r="4.5" fill="{PASSED}"/>'))
    if any(p.score is not None and not p.passed for p in points):
        items.append(("did not pass", f'<circle r="4.5" fill="{FAILED}"/>'))
    if any(p.score is None for p in points):
        items.append(
            ("no score", f'<path d="M-4,-4L4,4M-4,4L4,-4" stroke="{UNSCORED}" stroke-width="2.5"/>')
        )
    if threshold is not None:
        items.append(
            (
                "pass threshold",
                f'<line x1="-8" x2="8" y1="0" y2="0" stroke="{THRESHOLD}" stroke-dasharray="4 3"/>',
            )
        )
    if window:
        items.append(
            (
                "plateau window",
                '<rect x="-6" y="-6" width="12" height="12" fill="#fde68a" fill-opacity="0.8"/>',
            )
        )
    if halted:
        items.append(
            ("halted", f'<line x1="0" x2="0" y1="-6" y2="6" stroke="{HALT}" stroke-width="2"/>')
        )
    out = ['<g class="legend">']
    at, row = float(LEFT), 0
    for label, mark in items:
        width = 22 + CHAR * len(label)
        if at + width > WIDTH - RIGHT and at > LEFT:
            at, row = float(LEFT), row + 1
        out.append(
            f'<g class="legend-item" transform="translate({at + 8:.1f} {16 + row * LEGEND_ROW})">'
            f'{mark}<text x="14" y="4.5" font-size="{FONT}" fill="#374151">{label}</text></g>'
        )
        at += width + 14
    out.append("</g>")
    return "".join(out), row + 1 if items else 0

"""A stage's score curve as inline SVG, drawn on the server (no JavaScript).

It shows what no general plot does: the pass threshold the verdicts had to
reach, the plateau window the rule looks at (the last `patience` scored
attempts of the current run), and where the task halted. Every value is
formatted by us and every text escaped, so the markup is safe to inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 16, 30


@dataclass(frozen=True)
class Point:
    number: int  # attempt number
    score: float
    passed: bool
    run: int


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
    low_x, high_x = min(numbers), max(*numbers, min(numbers) + 1)
    values = [p.score for p in points] + ([pass_score] if pass_score is not None else [])
    low_y, high_y = min(0.0, *values), max(1.0, *values)

    def x(n: float) -> float:
        return LEFT + (n - low_x) / (high_x - low_x) * (WIDTH - LEFT - RIGHT)

    def y(v: float) -> float:
        return TOP + (high_y - v) / (high_y - low_y) * (HEIGHT - TOP - BOTTOM)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title or "score curve")}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        _axes(x, y, low_x, high_x, low_y, high_y),
    ]
    window = _window(points, patience, current_run)
    if window:
        x0, x1 = x(window[0]) - 6, x(window[-1]) + 6
        parts.append(
            f'<rect class="plateau-window" x="{x0:.1f}" y="{TOP}" width="{x1 - x0:.1f}" '
            f'height="{HEIGHT - TOP - BOTTOM}" fill="#fde68a" fill-opacity="0.5">'
            f"<title>plateau window: the last {patience} scored attempts</title></rect>"
        )
    if pass_score is not None:
        parts.append(
            f'<line class="pass-threshold" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
            f'y1="{y(pass_score):.1f}" y2="{y(pass_score):.1f}" stroke="#16a34a" '
            f'stroke-dasharray="6 4"/>'
            f'<text x="{WIDTH - RIGHT}" y="{y(pass_score) - 4:.1f}" text-anchor="end" '
            f'font-size="11" fill="#16a34a">pass {pass_score:g}</text>'
        )
    line = " ".join(f"{x(p.number):.1f},{y(p.score):.1f}" for p in points)
    parts.append(f'<polyline points="{line}" fill="none" stroke="#2563eb" stroke-width="2"/>')
    for p in points:
        colour = "#16a34a" if p.passed else "#2563eb"
        parts.append(
            f'<circle class="score" data-attempt="{p.number}" data-score="{p.score:g}" '
            f'cx="{x(p.number):.1f}" cy="{y(p.score):.1f}" r="4" fill="{colour}">'
            f"<title>attempt {p.number}: {p.score:g}</title></circle>"
        )
    if halted_at is not None:
        hx = x(halted_at)
        label = escape(f"halted: {halt_reason}" if halt_reason else "halted")
        parts.append(
            f'<line class="halt-point" x1="{hx:.1f}" x2="{hx:.1f}" y1="{TOP}" '
            f'y2="{HEIGHT - BOTTOM}" stroke="#dc2626" stroke-width="2"/>'
            f'<text x="{hx - 4:.1f}" y="{TOP + 12}" text-anchor="end" font-size="11" '
            f'fill="#dc2626">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _window(points: Sequence[Point], patience: int | None, run: int | None) -> list[int]:
    if not patience or run is None:
        return []
    current = [p.number for p in points if p.run == run]
    return current[-patience:] if len(current) > patience else []


def _axes(x: object, y: object, low_x: int, high_x: int, low_y: float, high_y: float) -> str:
    assert callable(x) and callable(y)
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = [
        f'<line x1="{LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#6b7280"/>',
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="#6b7280"/>',
    ]
    for value in (low_y, (low_y + high_y) / 2, high_y):
        out.append(
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#374151">{value:g}</text>'
        )
    step = max(1, (high_x - low_x) // 10)
    for n in range(low_x, high_x + 1, step):
        out.append(
            f'<text x="{x(n):.1f}" y="{bottom + 16}" text-anchor="middle" font-size="11" '
            f'fill="#374151">{n}</text>'
        )
    return "".join(out)

"""One way to print money, for every table and line that shows a cost.

Agent attempts cost fractions of a cent: two decimals would print most of
them as 0.00, so costs show four; a cost too small even for that says so
rather than read as nothing spent. JSON and CSV keep the number as recorded.
"""

from __future__ import annotations

SMALLEST = 0.0001


def money(value: float | None) -> str:
    """`$0.0006`, `$12.3400`; `<$0.0001` for a cost above zero but below that."""
    if value is None:
        return ""
    if 0 < abs(value) < SMALLEST:
        return ("-" if value < 0 else "") + f"<${SMALLEST:.4f}"
    return f"${value:.4f}"

"""Tasks that wait on tasks (`add --after`): the checks on the graph, and
what a waiting task is waiting for.

Dependencies are written once, when the waiting task is added, and only on
tasks that exist by then or are added in the same input; so a cycle can
only be closed inside one `add`, and checking that input is enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.errors import DependencyError


def parse_after(value: str) -> tuple[str, ...]:
    """`A,B` as given to `--after`: names in order, blanks and repeats dropped."""
    names: list[str] = []
    for part in value.split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


def find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in `task -> tasks it waits on`, as the slugs around it
    (first repeated at the end), or None. Iterative: an input of many
    thousand tasks in one chain must not hit the recursion limit."""
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(edges[start])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                on_path.discard(path[-1])
                done.add(path.pop())
            elif nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done and nxt in edges:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(edges[nxt]))
    return None


def check_waits(new: Mapping[str, Sequence[str]], existing: set[str]) -> None:
    """Refuse (exit 65) a wait on a task that is neither there nor in this
    input, on itself, or around a cycle."""
    for slug, after in new.items():
        for other in after:
            if other == slug:
                raise DependencyError(f"task {slug!r} cannot wait on itself (--after {slug})")
            if other not in new and other not in existing:
                raise DependencyError(f"task {slug!r} waits on {other!r}, which does not exist")
    cycle = find_cycle(new)
    if cycle is not None:
        raise DependencyError("tasks would wait on each other in a cycle: " + " -> ".join(cycle))


@dataclass(frozen=True)
class Wait:
    """One task another waits on, as `explain`, `show` and the board name it."""

    slug: str
    state: str
    status: str
    halt_reason: str | None = None


def waiting_line(waits: Sequence[Wait]) -> str | None:
    """What the waiting is about, in one line; None when nothing is in the way."""
    pending = [w for w in waits if w.status != "complete"]
    if not pending:
        return None
    halted = [w for w in pending if w.status == "halted"]
    cancelled = [w for w in pending if w.status == "cancelled"]
    if cancelled:
        names = ", ".join(w.slug for w in cancelled)
        return f"waits on {names}, cancelled: it never runs (cancel it, or add it again)"
    if halted:
        names = ", ".join(
            w.slug + (f" (halted: {w.halt_reason})" if w.halt_reason else " (halted)")
            for w in halted
        )
        return f"waits on {names}: it runs only after `orchestrator resume` and completion"
    named = ", ".join(f"{w.slug} ({w.state})" for w in pending)
    return f"waits until {named} {'is' if len(pending) == 1 else 'are'} complete"

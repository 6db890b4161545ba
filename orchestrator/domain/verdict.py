"""Find and normalise the JSON verdict a verifier prints.

Verifiers are often language models: they wrap the verdict in prose, in a
```` ```json ```` fence, or print several objects of which the last is meant.
The parser therefore searches in a fixed order (whole text, last json fence,
last top-level brace span) and coerces whatever it finds rather than
rejecting it, because a verdict thrown away costs a whole attempt while a
coerced one costs nothing (the seeds' D-V1..D-V5; a wrong `"pass": "false"`
once passed as true).

Why the search is hand-written: calling `json.JSONDecoder.raw_decode` at
every `{` is quadratic (each failure builds an error message that counts
lines from the start), so a verifier printing megabytes of braces would stall
the tick. One pass over the text records the top-level `{...}` spans; each is
decoded at most once and they do not overlap, so the work is linear. Only the
last `MAX_SCAN_CHARS` characters are read: captured output is capped anyway
and the verdict comes last.

Why every string is cleaned: `json.loads` turns `"\\ud800"` into a lone
surrogate and `"\\u0000"` into NUL; both are valid in a Python `str` but fail
far away, in the database driver or in `os.environ` for the next attempt's
hint.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from orchestrator.domain.text import clean_text

MAX_SCAN_CHARS = 65536
"""Only this many characters at the end of the text are searched."""

NEUTRAL_SCORE = 0.5
"""The score of a verdict whose `score` is present but unusable (D-V2, D-V3)."""

RECHECK_DEFAULT = 60.0
"""The wait of a pending verdict whose `recheck_seconds` is missing or unusable."""
RECHECK_MIN = 1.0
RECHECK_MAX = 86400.0
"""A pending verdict's wait is clamped to [RECHECK_MIN, RECHECK_MAX]: 0 would
rerun the verifier on every tick, a year would outlive any `pending_timeout`."""

# The keys that make an object a verdict rather than prose (`_find_object`).
_VERDICT_KEYS = ("pass", "score", "pending")

# The characters the brace scanner acts on; everything else is skipped by the
# regex engine in C, which keeps the single Python-level pass cheap.
_SCANNED = re.compile(r'[{}"\\\n]')


@dataclass(frozen=True)
class Verdict:
    """A normalised verdict: every field has its contract type and range."""

    passed: bool
    score: float
    reasons: tuple[str, ...]
    next_hint: str
    # A verdict that waits (CI running, a review not in): neither pass nor
    # fail; the task is rechecked after `recheck_seconds`.
    pending: bool = False
    recheck_seconds: float | None = None

    def to_dict(self) -> dict[str, object]:
        """The verdict as the JSON object of the contract (`pass`, not `passed`)."""
        data: dict[str, object] = {
            "pass": self.passed,
            "score": self.score,
            "reasons": list(self.reasons),
            "next_hint": self.next_hint,
        }
        if self.pending:
            data["pending"] = True
            data["recheck_seconds"] = self.recheck_seconds
        return data


def parse_verdict(text: str) -> Verdict | None:
    """Find the verdict in `text`, coerced; None when there is none. Never raises.

    The search, in order (on the last `MAX_SCAN_CHARS` characters):

    1. The whole text, stripped, is JSON: the verdict when it is an object,
       otherwise there is none (the text is not searched further).
    2. The last fenced block tagged ``json`` (case-insensitive; the tag is
       the first word of the info string) whose content is one JSON object
       with a ``pass``, ``score`` or ``pending`` key.
       Only a ``json`` tag marks a verdict block: a bare ```` ``` ```` or
       another tag is often an example or a log, and its content is still
       seen by step 3. An unclosed fence runs to the end of the text.
    3. The last top-level balanced `{...}` span (the one that ends last, not
       an object nested in it) that parses as a JSON object with a ``pass``,
       ``score`` or ``pending`` key; spans that do not parse or lack them all are passed
       over. Braces inside JSON strings do not count. A `{` that is never
       closed does not hide the spans after it.
    4. When no object has any of these keys: the object steps 2 and 3 would have
       found without the key rule (the last fenced one, else the last span).

    Bare `NaN`, `Infinity` and `-Infinity` are accepted, duplicate keys keep
    the last value. Any object is a verdict (missing keys take their
    defaults, see `coerce_verdict`).
    """
    try:
        if not isinstance(text, str):
            return None
        window = text[-MAX_SCAN_CHARS:]
        data = _find_object(window)
        return None if data is None else coerce_verdict(data)
    except Exception:  # the contract says never raises; a bug must not stop a tick
        return None


def strict_pass_problem(text: str) -> str | None:
    """Why the verdict in `text` fails the strict rule (`strict_verdict = true`), or None.

    A gate must not open on `"pass": "no"`, `"0"` or `1`, which the lenient
    rule reads as true: under the strict rule `pass` is a JSON bool or the
    string "true"/"false" (any case, surrounding whitespace ignored), and
    anything else, a missing `pass` included, makes the attempt an
    `invalid_verdict`. Finds the same object `parse_verdict` does; None when
    there is no verdict at all (the caller reports that already).
    """
    try:
        data = _find_object(text[-MAX_SCAN_CHARS:]) if isinstance(text, str) else None
    except Exception:  # as parse_verdict: never raises
        return None
    if data is None or _coerce_pending(data.get("pending")):
        return None  # no verdict, or one that waits: it opens nothing
    if "pass" not in data:
        return 'strict_verdict: the verdict has no "pass" (a JSON bool is required)'
    raw = data["pass"]
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return None
    return (
        f'strict_verdict: "pass" must be true or false (or the string "true"/"false"), '
        f"got {clean_text(_json_text(raw), 80)}"
    )


def coerce_verdict(data: Mapping[str, object]) -> Verdict:
    """Coerce a decoded JSON object into a `Verdict` (D-V1..D-V5).

    - `pass`: a bool as is; a string is true/false when it reads
      `"true"`/`"false"` (any case, surrounding whitespace ignored), else
      `bool(s.strip())` (so `"yes"` passes and `"  "` fails); anything else
      `bool(x)` (missing: false).
    - `score`: missing → 0.0; not convertible by `float()` (None, a list, a
      non-numeric string, a huge integer) → 0.5; not finite → 0.5; then
      clamped to [0, 1]. `true` → 1.0, `"2.0"` → 1.0.
    - `reasons`: a list → its items, strings as they are, anything else as its
      JSON text; anything else → ().
    - `next_hint`: a string → itself; anything else → "".
    - `pending`: true only for JSON `true` or the string "true" (any case,
      whitespace ignored); anything else is not pending. Stricter than
      `pass` because a wrong pending holds the task for its whole
      `pending_timeout`. A pending verdict's `pass` and `score` are ignored
      (false, 0.0).
    - `recheck_seconds` (pending only): as `score`, but missing or unusable →
      `RECHECK_DEFAULT`, then clamped to [`RECHECK_MIN`, `RECHECK_MAX`].

    Every string is passed through `clean_text` (no NUL, no surrogates).
    """
    reasons = _coerce_reasons(data.get("reasons"))
    next_hint = _coerce_hint(data.get("next_hint"))
    if _coerce_pending(data.get("pending")):
        return Verdict(
            passed=False,
            score=0.0,
            reasons=reasons,
            next_hint=next_hint,
            pending=True,
            recheck_seconds=_coerce_recheck(data.get("recheck_seconds")),
        )
    return Verdict(
        passed=_coerce_pass(data.get("pass")),
        score=_coerce_score(data),
        reasons=reasons,
        next_hint=next_hint,
    )


def _coerce_pending(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    return isinstance(raw, str) and raw.strip().lower() == "true"


def _coerce_recheck(raw: object) -> float:
    if raw is None or isinstance(raw, bool):
        return RECHECK_DEFAULT
    try:
        seconds = float(raw)  # type: ignore[arg-type]  # every failure is the default
    except Exception:  # TypeError, ValueError, OverflowError: as `_coerce_score`
        return RECHECK_DEFAULT
    if not math.isfinite(seconds):
        return RECHECK_DEFAULT
    return min(RECHECK_MAX, max(RECHECK_MIN, seconds))


def _coerce_pass(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        stripped = raw.strip()
        lowered = stripped.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        return bool(stripped)
    try:
        return bool(raw)
    except Exception:  # a caller's own Mapping may hold anything
        return False


def _coerce_score(data: Mapping[str, object]) -> float:
    if "score" not in data:
        return 0.0
    raw = data["score"]
    try:
        score = float(raw)  # type: ignore[arg-type]  # every failure is the neutral score
    except Exception:  # TypeError (null, list), ValueError ("great"), OverflowError (10**400)
        return NEUTRAL_SCORE
    # Finiteness first: min/max with NaN depend on argument order.
    if not math.isfinite(score):
        return NEUTRAL_SCORE
    return min(1.0, max(0.0, score))


def _coerce_reasons(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(clean_text(item if isinstance(item, str) else _json_text(item)) for item in raw)


def _coerce_hint(raw: object) -> str:
    return clean_text(raw) if isinstance(raw, str) else ""


def _json_text(item: object) -> str:
    """The JSON text of a non-string reason; cannot raise."""
    try:
        return json.dumps(item, ensure_ascii=False, allow_nan=True, default=str)
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        return str(item)
    except Exception:  # deep nesting breaks repr too
        return f"<unprintable {type(item).__name__}>"


def _find_object(window: str) -> Mapping[str, object] | None:
    whole = window.strip()
    if not whole:
        return None
    try:
        decoded = json.loads(whole)
    except (ValueError, RecursionError):
        pass  # not JSON as a whole: search inside it
    else:
        return decoded if isinstance(decoded, dict) else None
    # A verdict names `pass` or `score`; an object after it that names
    # neither (`PS: set {"debug": false}`) is prose, not the verdict. Only
    # when no object names either does the last object count, as it always did.
    # Fenced blocks and spans compete by position: a format example quoted
    # in a fence before the real verdict does not beat it.
    fallback: dict[str, object] | None = None
    keyed: tuple[int, dict[str, object]] | None = None
    candidates = itertools.chain(
        _fenced_json_blocks(window),
        ((start, window[start:end]) for start, end in _top_level_spans(window)),
    )
    for position, candidate in candidates:
        data = _loads_object(candidate)
        if data is None:
            continue
        if any(key in data for key in _VERDICT_KEYS):
            if keyed is None or position > keyed[0]:
                keyed = (position, data)
        elif fallback is None:
            fallback = data
    return fallback if keyed is None else keyed[1]


def _loads_object(candidate: str) -> dict[str, object] | None:
    """`candidate` decoded when it is one JSON object, else None."""
    try:
        decoded = json.loads(candidate)
    except (ValueError, RecursionError):  # ValueError also covers >4300-digit ints
        return None
    return decoded if isinstance(decoded, dict) else None


def _fenced_json_blocks(window: str) -> Iterator[tuple[int, str]]:
    """(offset of the opening fence, contents) of ```json fences, last first.

    Line-based, as in CommonMark: an opening fence is a line starting (after
    any indentation) with three or more backticks and an info string without
    backticks; it closes at a line of at least as many backticks alone.
    """
    blocks: list[tuple[int, str]] = []
    fence = 0  # backticks of the open fence; 0 when outside a fence
    is_json = False
    body: list[str] = []
    opened = offset = 0
    for line in window.split("\n"):
        here, offset = offset, offset + len(line) + 1
        stripped = line.strip()
        if fence:
            ticks = len(stripped) - len(stripped.lstrip("`"))
            if ticks >= fence and ticks == len(stripped):
                if is_json:
                    blocks.append((opened, "\n".join(body)))
                fence, body = 0, []
            elif is_json:
                body.append(line)
            continue
        if stripped.startswith("```"):
            ticks = len(stripped) - len(stripped.lstrip("`"))
            info = stripped[ticks:].strip()
            if "`" in info:
                continue  # inline code such as ```json {...}``` on one line
            fence, opened = ticks, here
            words = info.split(maxsplit=1)
            is_json = bool(words) and words[0].lower() == "json"
    if fence and is_json:
        blocks.append((opened, "\n".join(body)))
    return reversed(blocks)


def _top_level_spans(window: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the maximal balanced `{...}` spans, the one ending last first.

    A span is maximal when no balanced span contains it; a `{` that never
    closes contains nothing. Maximal spans are disjoint, so decoding each of
    them once is linear in the window. String state is tracked only inside a
    span (a quote in prose means nothing) and ends at a newline, which a JSON
    string cannot contain, so one stray quote cannot hide the rest of the text.
    """
    stack: list[int] = []  # positions of the open braces
    closed: list[tuple[int, int, int, int]] = []  # (start, end, depth, parent)
    in_string = False
    escaped_at = -1
    for match in _SCANNED.finditer(window):
        i = match.start()
        char = window[i]
        if char == "\n":
            in_string = False
        elif i == escaped_at:
            pass
        elif in_string:
            if char == "\\":
                escaped_at = i + 1
            elif char == '"':
                in_string = False
        elif char == "{":
            stack.append(i)
        elif char == "}":
            if stack:
                start = stack.pop()
                depth = len(stack)
                closed.append((start, i + 1, depth, stack[-1] if depth else -1))
        elif char == '"' and stack:
            in_string = True
    # `stack` now holds the braces never closed. A span is maximal when its
    # parent is one of them: a parent that closed later contains it.
    for start, end, depth, parent in reversed(closed):
        if depth == 0 or (depth <= len(stack) and stack[depth - 1] == parent):
            yield start, end

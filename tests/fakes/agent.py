"""A fake worker / verifier for the end-to-end tests, driven by its argv.

Tests put it in a stage's `worker` or `verifier` list and then wait on the
files it writes (pidfiles, dumps, markers) or on database rows, never on
fixed sleeps. Options are applied in this order:

  --pidfile F        write our pid (and process group) to F at start
  --dump F           append one JSON line at start (argv, cwd, pid, pgid,
                     selected environment, time) and one at the end
  --touch F          create the marker file F (proves we ran)
  --ignore-term      ignore SIGTERM (the group must get SIGKILL)
  --grandchild F     start a grandchild that sleeps and holds our stdout and
                     stderr; its pid goes to F
  --sleep LIST       seconds to sleep, by attempt: "30,0" sleeps 30 at attempt
                     1 and 0 from then on (ORCHESTRATOR_ATTEMPT picks; the last
                     entry repeats)
  --wait-file F      then wait (up to --wait-limit seconds, 60 by default)
                     until F exists: the test decides when we finish
  --noise N          print N bytes of filler to stdout first (in small chunks,
                     so our own memory stays small)
  --sequence F       print the next line of F (a score such as 0.4 becomes a
                     failing verdict with that score; any other line is printed
                     as it is); a sidecar F.pos remembers the position and the
                     last line repeats once F is used up
  --verdict TEXT     print TEXT as it is (a JSON verdict, or anything)
  --score X, --pass, --hint H
                     print {"pass": ..., "score": X, "next_hint": H}
  --exit LIST        exit status, by attempt like --sleep (default 0)
  --arg=VALUE        ignored; lets a test see a rendered placeholder in the dump

Standard library only: it runs under the tick's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ENV_NAMES = (
    "PATH",
    "HOME",
    "FAKE_SECRET",
    "FAKE_ALLOWED",
    "FAKE_STAGE_ENV",
)


def _by_attempt(spec: str, cast: type[float] | type[int]) -> float | int:
    values = [cast(part) for part in spec.split(",") if part.strip()]
    try:
        attempt = int(os.environ.get("ORCHESTRATOR_ATTEMPT", "1"))
    except ValueError:
        attempt = 1
    return values[min(max(attempt, 1), len(values)) - 1]


def _append(path: str, record: dict[str, object]) -> None:
    data = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    Path(tmp).write_text(text)
    Path(tmp).replace(path)


def _next_line(path: str) -> str:
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    pos_file = Path(path + ".pos")
    pos = int(pos_file.read_text()) if pos_file.exists() else 0
    pos_file.write_text(str(pos + 1))
    return lines[min(pos, len(lines) - 1)]


def _sequence_text(line: str) -> str:
    try:
        score = float(line)
    except ValueError:
        return line
    return json.dumps({"pass": False, "score": score, "reasons": ["from sequence"]})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent")
    parser.add_argument("--pidfile")
    parser.add_argument("--dump")
    parser.add_argument("--touch")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--grandchild")
    parser.add_argument("--sleep", default="0")
    parser.add_argument("--wait-file")
    parser.add_argument("--wait-limit", type=float, default=60.0)
    parser.add_argument("--noise", type=int, default=0)
    parser.add_argument("--sequence")
    parser.add_argument("--verdict")
    parser.add_argument("--score", type=float)
    parser.add_argument("--pass", dest="passed", action="store_true")
    parser.add_argument("--hint", default="")
    parser.add_argument("--exit", default="0")
    parser.add_argument("--arg", action="append", default=[])  # ignored; shows in --dump
    args = parser.parse_args(argv)

    started = time.time()
    base = {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "task": os.environ.get("ORCHESTRATOR_TASK"),
        "attempt": os.environ.get("ORCHESTRATOR_ATTEMPT"),
    }
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.dump:
        env = {
            k: v for k, v in os.environ.items() if k.startswith("ORCHESTRATOR_") or k in ENV_NAMES
        }
        _append(
            args.dump,
            {**base, "phase": "start", "t": started, "argv": argv, "cwd": os.getcwd(), "env": env},
        )
    if args.grandchild:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            stdout=sys.stdout,
            stderr=sys.stderr,
        )
        _write_atomic(args.grandchild, str(child.pid))
    if args.touch:
        Path(args.touch).touch()
    if args.pidfile:
        _write_atomic(args.pidfile, f"{os.getpid()} {os.getpgid(0)}")

    delay = float(_by_attempt(args.sleep, float))
    if delay > 0:
        time.sleep(delay)

    if args.wait_file:
        deadline = time.monotonic() + args.wait_limit
        while not Path(args.wait_file).exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    out = sys.stdout.buffer
    remaining = args.noise
    chunk = (b"x" * 79 + b"\n") * 800  # 64000 bytes, printable, no braces
    while remaining > 0:
        piece = chunk[: min(remaining, len(chunk))]
        out.write(piece)
        remaining -= len(piece)
    text: str | None = None
    if args.sequence:
        text = _sequence_text(_next_line(args.sequence))
    elif args.verdict is not None:
        text = args.verdict
    elif args.score is not None or args.passed:
        score = 1.0 if args.score is None else args.score
        text = json.dumps({"pass": args.passed, "score": score, "next_hint": args.hint})
    if text is not None:
        out.write(b"\n" + text.encode() + b"\n")
    out.flush()

    if args.dump:
        _append(args.dump, {**base, "phase": "end", "t": time.time(), "started": started})
    return int(_by_attempt(args.exit, int))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

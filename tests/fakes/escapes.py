"""A worker or verifier whose children escape it: by `setsid`, by a double
fork (the daemon's idiom: fork, setsid, fork), by `nohup`, and by `env -i`
with `setsid` (no process tag left to find it by). Each escaped child is a
shell that starts a marked sleeper and waits; both carry the marker in
their command line, so a test finds them whatever their environment.

    escapes.py run ROLE MARKER   the command (ROLE: worker or verifier)
    escapes.py leaf FILE MARKER  the sleeper: notes its pid and its parent's
    escapes.py jobs TASK MARKER SHARED   two attempts at once (`--jobs 2`):
        t1 leaves a child that escaped and ends while t2 runs; t2 notes in
        SHARED/t2-saw whether its own escaped child lived on after t1's ended

The verifier prints a failing verdict when any of the worker's escaped
children is still alive when it runs (it sees them only outside a sandbox).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

FOLDER = Path(".escaped")
KINDS = ("setsid", "double", "nohup", "envi")


def tree(file: Path, marker: str) -> list[str]:
    """A shell (marked by its $0) that starts the marked leaf and waits on it."""
    script = f'{sys.executable} {Path(__file__).resolve()} leaf "$1" "$0" & wait'
    return ["/bin/sh", "-c", script, marker, str(file.resolve())]


def escape(kind: str, role: str, marker: str) -> None:
    argv = tree(FOLDER / f"{role}-{kind}", f"{marker}-{role}-{kind}")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    if kind == "setsid":  # keeps the command's stdout, as a careless child does
        subprocess.Popen([shutil.which("setsid") or "setsid", *argv])
    elif kind == "nohup":
        subprocess.Popen([shutil.which("nohup") or "nohup", *argv], **quiet)  # type: ignore[call-overload]
    elif kind == "envi":
        setsid = shutil.which("setsid") or "/usr/bin/setsid"
        subprocess.Popen(["/usr/bin/env", "-i", setsid, *argv], **quiet)  # type: ignore[call-overload]
    elif os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(argv[0], argv)
        os._exit(0)


def alive_marked(marker: str) -> list[str]:
    """The worker's escaped children this process can see, still alive."""
    found = []
    for file in sorted(FOLDER.glob("worker-*")):
        for pid in file.read_text().split():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and stat.rpartition(")")[2].split()[0] != "Z":
                found.append(f"{file.name}:{pid}")
    return found


def run(role: str, marker: str) -> int:
    FOLDER.mkdir(exist_ok=True)
    if role == "worker":
        Path("feature.txt").write_text("good\n")
    still = alive_marked(marker) if role == "verifier" else []
    for kind in KINDS:
        escape(kind, role, marker)
    deadline = time.monotonic() + 60
    while not all((FOLDER / f"{role}-{kind}").exists() for kind in KINDS):
        if time.monotonic() > deadline:
            print("escaped children never started", file=sys.stderr)
            return 3
        time.sleep(0.01)
    if role == "verifier":
        verdict = {"pass": not still, "score": 0.0 if still else 1.0}
        if still:
            verdict["next_hint"] = "still running: " + ", ".join(still)
        print(json.dumps(verdict))
    return 0


def _wait(predicate: object, what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting: {what}")
        time.sleep(0.01)


def _alive(file: Path, marker: str) -> bool:
    for pid in file.read_text().split():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmdline and stat.rpartition(")")[2].split()[0] != "Z":
            return True
    return False


def jobs(task: str, marker: str, shared: Path) -> int:
    mine = shared / task
    argv = tree(mine, f"{marker}-{task}")
    subprocess.Popen([shutil.which("setsid") or "setsid", *argv], stdout=subprocess.DEVNULL)
    _wait(mine.exists, f"{task}'s escaped child")
    if task == "t1":  # end while t2 runs
        _wait((shared / "t2").exists, "t2 started")
        return 0
    first = shared / "t1"
    _wait(first.exists, "t1's escaped child")
    _wait(lambda: not _alive(first, marker), "t1's escaped child ended")
    (shared / "t2-saw").write_text("kept\n" if _alive(mine, marker) else "lost\n")
    return 0


def leaf(file: str, marker: str) -> None:
    del marker  # only for the command line
    Path(file + ".tmp").write_text(f"{os.getpid()} {os.getppid()}\n")
    os.rename(file + ".tmp", file)
    time.sleep(10**6)


if __name__ == "__main__":
    if sys.argv[1] == "leaf":
        leaf(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "jobs":
        sys.exit(jobs(sys.argv[2], sys.argv[3], Path(sys.argv[4])))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3]))

"""The stdlib minimum of a tick: what any durable orchestrator must do per
attempt, with nothing else. The per-attempt benchmark divides by this.

For each of N tasks: an open transaction (the attempt row) and a commit,
spawn the worker, spawn the verifier and read its output, parse the JSON,
then a close transaction (attempt outcome + task state) and a commit.
SQLite in WAL mode with synchronous=FULL, like the orchestrator.

`--files` adds what an attempt also does on the filesystem: the task's
workspace, its state folder and the attempt's, and the verifier's captured
output. On ext4 each of those is journal work the next fsync pays for, which
the bench reports on a line of its own.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys


def main() -> None:
    count, path = int(sys.argv[1]), sys.argv[2]
    files = "--files" in sys.argv[3:]
    root = f"{path}.files"
    if files:
        os.makedirs(f"{root}/tasks", exist_ok=True)
        os.makedirs(f"{root}/state", exist_ok=True)
    worker = ["/bin/true"]
    verifier = ["/bin/echo", '{"pass": true, "score": 1.0}']
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY, task INTEGER, "
        "outcome TEXT, score REAL)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, state TEXT)")
    # The tasks exist before the tick, as `add --from` made them: one
    # transaction, not one commit (and fsync) per row charged to the attempts.
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO tasks (state) VALUES ('ready')", [()] * count)
    conn.execute("COMMIT")
    for task in range(1, count + 1):
        conn.execute("BEGIN IMMEDIATE")
        attempt = conn.execute("INSERT INTO attempts (task) VALUES (?)", (task,)).lastrowid
        conn.execute("UPDATE tasks SET state = 'running' WHERE id = ?", (task,))
        conn.execute("COMMIT")
        if files:
            os.mkdir(f"{root}/tasks/{task}")
            os.makedirs(f"{root}/state/{task}/work-001")
        subprocess.run(worker, check=True)
        out = subprocess.run(verifier, check=True, capture_output=True).stdout
        verdict = json.loads(out)
        if files:
            with open(f"{root}/state/{task}/work-001/verifier.out", "wb") as capture:
                capture.write(out)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE attempts SET outcome = 'passed', score = ? WHERE id = ?",
            (verdict["score"], attempt),
        )
        conn.execute("UPDATE tasks SET state = 'complete' WHERE id = ?", (task,))
        conn.execute("COMMIT")
    conn.close()


if __name__ == "__main__":
    main()

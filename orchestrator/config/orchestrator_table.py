"""The keys of the `[orchestrator]` table: where the database, state and
logs live, how long a tick waits, the host's own settings.

Apart from `core`, which declares a pipeline's and a stage's keys: this
table is read once per installation, not per stage, and is the longest.
"""

from __future__ import annotations

import re

from orchestrator.config.schema import (
    Checked,
    Checks,
    Choice,
    FilePath,
    Integer,
    Key,
    Number,
    Section,
    Strings,
    Text,
)

ORCHESTRATOR = frozenset({"orchestrator"})
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _variable_names(checks: Checks, names: tuple[str, ...], key: str) -> None:
    for index, name in enumerate(names):
        if not _VARIABLE.fullmatch(name) or name.startswith("ORCHESTRATOR_"):
            checks.fail(f"{key}[{index}]", f"{name!r} is not a variable name a command may get")


ORCHESTRATOR_SECTION: Section[None] = Section(
    name="engine",
    table="orchestrator",
    keys=(
        Key(
            "database",
            Text(),
            "sqlite:///orchestrator.db",
            "SQLAlchemy URL: `sqlite:///relative.db`, `sqlite:////absolute.db`, "
            "`postgresql+psycopg://user:pass@host/db`. `--db` and `ORCHESTRATOR_DB_URL` "
            "override it (a relative SQLite path given there is relative to the current folder)",
            ORCHESTRATOR,
            shown="`sqlite:///orchestrator.db` (beside the config)",
        ),
        Key(
            "workspace_root",
            FilePath(),
            "tasks",
            "each task works in `<workspace_root>/<slug>/`, shared by all its stages, created "
            "on first use (by the pipeline's `setup` when set), never cleaned",
            ORCHESTRATOR,
            shown="`tasks`",
            read_default=True,
        ),
        Key(
            "lock_file",
            FilePath(),
            "orchestrator.lock",
            "the host's tick lock (`flock`); keep it on a local filesystem, not in `/tmp`",
            ORCHESTRATOR,
            shown="`orchestrator.lock`",
            read_default=True,
        ),
        Key(
            "state_root",
            FilePath(),
            "state",
            "the orchestrator's own files per attempt (`<state_root>/<slug>/<stage>-<NNN>/`: "
            "`worker.out`, `worker.err`, `verifier.out`, `verifier.err`, `prompt.md`, "
            "`context.json`), outside the workspace so they never show in the agent's "
            "`git status`. Each attempt's folder is made new; one already there (no attempt of "
            "ours reuses a folder) is not used, and the attempt is recorded `host_error`, "
            "counting toward nothing. Files there and in workspaces are read only when regular "
            "(never through a link, a FIFO or a device) and written by renaming a new file into "
            "place; a folder the worker moved away or swapped for a link is noted on its "
            "attempt, and the tick goes on (only a full, read-only or failing disk stops it "
            "claiming)",
            ORCHESTRATOR,
            shown="`state`",
            read_default=True,
        ),
        Key(
            "lease_seconds",
            Number(low=0.0, low_inclusive=False),
            900.0,
            "how long a claim holds without renewal; renewed every "
            "`min(5 s, lease_seconds / 3)` while the attempt runs; recovery treats an expired "
            "lease as a crashed attempt",
            ORCHESTRATOR,
        ),
        Key(
            "retry_interval",
            Number(low=0.0),
            60.0,
            "seconds after an attempt ends before the same tick may give the task another one. "
            "A tick never waits for it: a short tick advances a task at most one attempt, a "
            "long tick (other attempts still running) retries after this long. `0` retries at "
            "once (the demo)",
            ORCHESTRATOR,
        ),
        Key(
            "max_interrupts",
            Integer(1),
            3,
            "halt a task as `interrupted` after this many interrupted attempts in a row, so a "
            "tick killed by an outer timeout cannot loop for ever",
            ORCHESTRATOR,
        ),
        Key(
            "env_deny",
            Strings(),
            (),
            "environment variables never passed to workers, verifiers and hooks: exact names "
            'or shell patterns such as `"*_TOKEN"` (case-sensitive)',
            ORCHESTRATOR,
        ),
        Key(
            "env",
            Checked(Strings(), _variable_names),
            (),
            "names of variables every stage's commands, every `setup` and the landing (its "
            "`land_check`, `git push`, `gh`) are given from the tick's environment or, when it "
            "lacks them, `env_file`: what a cron tick needs that is no stage's secret "
            '(`["GH_REPO", "ANTHROPIC_BASE_URL"]`); a name set in neither is left unset. A name '
            "`env_deny` matches, a stage lists in `secrets` or a pipeline in `land_secrets` is "
            "refused (exit 78): secrets go through those keys only",
            ORCHESTRATOR,
        ),
        Key(
            "affinity",
            Choice(("host", "any")),
            "host",
            '`"host"`: a task stays on the host that first ran it (its workspace is there); '
            '`"any"`: any host\'s tick may claim it (workspace root on shared storage)',
            ORCHESTRATOR,
        ),
        Key(
            "busy_timeout",
            Number(low=0.0),
            30.0,
            "seconds a SQLite statement waits for another writer before failing with exit 69",
            ORCHESTRATOR,
        ),
        Key(
            "reconnect_seconds",
            Number(low=0.0),
            60.0,
            "how long a tick keeps retrying a transaction (claim, lease renewal, record) whose "
            "database connection was lost (a server restart, a failover, a killed session), "
            "backing off from 50 ms to 2 s; never longer than `lease_seconds`. Past it the tick "
            "stops its attempts and exits 69. `0`: no retry",
            ORCHESTRATOR,
        ),
        Key(
            "output_cap_bytes",
            Integer(1),
            1_048_576,
            "captured output kept per stream per command (a quarter from the head, the rest "
            "from the tail, where the verdict is); the stream's last line is kept whole up to "
            "`max(output_cap_bytes, 8 MiB)`, so an agent's one-line result envelope is read "
            "however long it is",
            ORCHESTRATOR,
        ),
        Key(
            "kill_grace_seconds",
            Number(low=0.0),
            5.0,
            "on timeout or interrupt, the process group gets SIGTERM, then SIGKILL after this long",
            ORCHESTRATOR,
        ),
        Key(
            "env_file",
            FilePath(),
            None,
            "a file of `NAME=value` lines (dotenv: `#` comments at a line's start, blank "
            "lines, an optional `export `, a value optionally in single quotes, or in double "
            'quotes with `\\n`, `\\t`, `\\\\`, `\\"` and `\\$` escapes; nothing is expanded) '
            "where a tick finds the stages' `secrets`, the `env` names and the pipelines' "
            "`land_secrets` that its environment lacks (an exported value wins); read at each "
            "tick, its variables reach only the commands those keys name them for. Refused "
            "(exit 78, one line naming the file and line, never the value) unless a regular "
            "file, not a link, that group and others cannot access "
            "(`chmod 600`)",
            ORCHESTRATOR,
        ),
    ),
)

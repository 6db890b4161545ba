"""The idle fast path never skips work a full tick would do.

Each state is made twice from one template (a migrated SQLite project with
six tasks); the fast path answers one copy, a real full tick (`Project.tick`)
runs on the other, and the two databases are compared. When the fast path
answers (exit 0), the full tick must have changed nothing but its idle row;
when the full tick changed nothing, the fast path must have answered (it is
no use otherwise), except where it is conservative by design.
"""

from __future__ import annotations

import ast
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import Project, make_project

from orchestrator.config import load_settings
from orchestrator.storage.schema import HEAD
from orchestrator.tick import idle
from orchestrator.tick.idle import marker, schema, sql, try_idle_tick

SLUGS = [f"t{i}" for i in range(6)]
TASK_STATES = ["ready", "awaiting_approval", "approved", "halted", "complete", "cancelled"]
BACKOFFS = [None, "past", "future"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, template_db: Path) -> Path:
    folder = tmp_path_factory.mktemp("idle") / "template"
    url = f"sqlite:///{folder / 'orchestrator.db'}"
    folder.mkdir()
    shutil.copyfile(template_db, folder / "orchestrator.db")
    project = make_project(folder, url)
    for slug in SLUGS:
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    return folder


def copy(template: Path, to: Path) -> Project:
    shutil.copytree(template, to)
    return Project(
        dir=to, db_url=f"sqlite:///{to / 'orchestrator.db'}", config=to / "orchestrator.toml"
    )


def env_of(project: Project) -> dict[str, str]:
    return {"ORCHESTRATOR_CONFIG": str(project.config), "ORCHESTRATOR_DB_URL": project.db_url}


def remember(
    project: Project, environ: dict[str, str] | None = None, db_given: str | None = "-"
) -> None:
    """What `orchestrator tick` notes before it ticks (cli.ticking), by
    default in the project's folder with its config and database exported."""
    db_given = project.db_url if db_given == "-" else db_given
    environ = env_of(project) if environ is None else environ
    loaded = load_settings(
        config=project.config,
        db_url=db_given,
        environ=environ,
        cwd=project.dir,
        require_config=True,
    )
    marker.remember(
        config=loaded.config_path,
        fingerprint=loaded.fingerprint,
        database=str(project.dir / "orchestrator.db"),
        lock_file=loaded.lock_file,
        state_root=loaded.state_root,
        busy_timeout=loaded.busy_timeout,
        hooks=bool(loaded.hooks),
        sweep=any(p.keep_worktree_days is not None for p in loaded.pipelines.values()),
        env_file=loaded.env_file,
        best=any(s.on_halt == "best" for p in loaded.pipelines.values() for s in p.stages),
        db_given=db_given,
        database_url=loaded.database_url,
        environ=environ,
    )


def dump(project: Project) -> dict[str, Any]:
    """Every row but the clock and pid of `ticks` rows (a tick's own)."""
    conn = sqlite3.connect(project.dir / "orchestrator.db")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out: dict[str, Any] = {}
        for table in tables:
            if table == "ticks":
                sql = "SELECT host, claimed, recovered, advanced, exit_code FROM ticks ORDER BY id"
            else:
                sql = f"SELECT * FROM {table} ORDER BY 1"
            out[table] = conn.execute(sql).fetchall()
        return out
    finally:
        conn.close()


def execute(project: Project, *statements: str) -> None:
    conn = sqlite3.connect(project.dir / "orchestrator.db", isolation_level=None)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


def both(
    template: Path, work: Path, *statements: str, config: str | None = None
) -> tuple[int | None, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(fast path's answer, database before, after the fast path, after a full tick)."""
    fast, full = copy(template, work / "fast"), copy(template, work / "full")
    for project in (fast, full):
        if config is not None:
            project.config.write_text(config)
        execute(project, *statements)
    before = dump(fast)
    remember(fast)
    answer = try_idle_tick(["tick", "-q"], env_of(fast), fast.dir)
    from orchestrator.api.project import Project as Library

    try:
        with Library.open(full.config, db=full.db_url) as library:
            library.tick()
    except Exception:  # a schema from the future: 78, as the CLI says
        pass
    return answer, before, dump(fast), dump(full)


def task_sql(slug: str, status: str, backoff: str | None) -> list[str]:
    stage = "research" if status in ("awaiting_approval", "approved") else "implement"
    stage = "complete" if status == "complete" else stage
    until = {
        None: "NULL",
        # Fixed, so both copies hold the same rows; text as UTCDateTime stores it.
        "past": "'2026-01-01 00:00:00.000000'",
        "future": "'2999-01-01 00:00:00.000000'",
    }[backoff]
    return [
        f"UPDATE tasks SET status = '{status}', stage = '{stage}', backoff_until = {until} "
        f"WHERE slug = '{slug}'"
    ]


def not_ready(status: str, backoff: str | None) -> bool:
    return status != "ready" or backoff == "future"


@settings(
    max_examples=int(os.environ.get("IDLE_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    tasks=st.lists(
        st.tuples(st.sampled_from(TASK_STATES), st.sampled_from(BACKOFFS)),
        min_size=len(SLUGS),
        max_size=len(SLUGS),
    ),
    ticks=st.sampled_from(["none", "idle", "worked", "failed"]),
)
def test_fast_path_answers_exactly_the_idle_states(
    template: Path, tmp_path_factory: pytest.TempPathFactory, tasks: list[Any], ticks: str
) -> None:
    statements = [
        sql for slug, (s, b) in zip(SLUGS, tasks, strict=True) for sql in task_sql(slug, s, b)
    ]
    row = (
        "INSERT INTO ticks (host, pid, started_at, finished_at, claimed, recovered, advanced, "
        "exit_code) VALUES ('{h}', 1, '2026-01-01 00:00:00.000000', "
        "'2026-01-01 00:00:00.000000', {c}, 0, 0, {x})"
    )
    host = os.uname().nodename
    statements += {
        "none": [],
        "idle": [row.format(h=host, c=0, x=0)],
        "worked": [row.format(h=host, c=1, x=0)],
        "failed": [row.format(h=host, c=0, x=70)],
    }[ticks]
    answer, before, after_fast, after_full = both(
        template, tmp_path_factory.mktemp("state"), *statements
    )
    nothing_due = all(not_ready(s, b) and s != "approved" for s, b in tasks)
    assert (answer == 0) == nothing_due, (tasks, answer)
    if answer == 0:
        # The full tick did nothing either; both moved (or made) the same idle row.
        assert after_fast == after_full
        assert after_fast["tasks"] == before["tasks"]
    else:
        assert after_fast == before  # declined: wrote nothing, the full tick will
        assert after_full != before


@pytest.mark.parametrize(
    ("name", "statements"),
    [
        ("future schema", ["UPDATE alembic_version SET version_num = '9999'"]),
        ("an unknown column", ["ALTER TABLE tasks ADD COLUMN after_ids TEXT"]),
        ("an unknown table", ["CREATE TABLE queues (name TEXT PRIMARY KEY, paused_until TEXT)"]),
        (
            "an expired lease",
            [
                "UPDATE tasks SET status = 'running', stage = 'implement' WHERE slug = 't0'",
                "INSERT INTO attempts (task_id, stage, run, number, hint, lease_token, "
                "lease_expires_at, host, boot_id, tick_pid, started_at) SELECT id, 'implement', "
                "run, 1, '', 'tok', '2026-01-01 00:00:00.000000', 'gone', 'b', 1, "
                "'2026-01-01 00:00:00.000000' FROM tasks WHERE slug = 't0'",
            ],
        ),
        (
            "a dead tick's open row",
            [
                "INSERT INTO ticks (host, pid, started_at, claimed, recovered, advanced) "
                f"VALUES ('{os.uname().nodename}', {2**22 + 7}, '2026-01-01 00:00:00', 0, 0, 0)"
            ],
        ),
    ],
)
def test_fast_path_declines_what_it_does_not_vouch_for(
    template: Path, tmp_path: Path, name: str, statements: list[str]
) -> None:
    park = [sql for slug in SLUGS for sql in task_sql(slug, "halted", None)]
    answer, before, after_fast, _ = both(template, tmp_path, *park, *statements)
    assert answer is None, name
    assert after_fast == before


@pytest.mark.parametrize(
    ("name", "statements"),
    [
        ("a task landing", ["UPDATE tasks SET status = 'landing' WHERE slug = 't0'"]),
        (
            "a pool pause that has ended",
            [
                "INSERT INTO pools (name, paused_until, paused_at, pause_streak) VALUES "
                "('claude', '2026-01-01 00:00:00.000000', '2025-12-31 00:00:00.000000', 1)"
            ],
        ),
        (
            "a halt that on_halt may restore",
            [
                "UPDATE tasks SET halt_reason = 'score_plateau', branch = 'task/t0' "
                "WHERE slug = 't0'"
            ],
        ),
    ],
)
def test_later_kinds_of_work_are_due(
    template: Path, tmp_path: Path, name: str, statements: list[str]
) -> None:
    """Landing, pools and best-attempt restore are work a full tick does:
    each one alone keeps the fast path from answering."""
    park = [sql for slug in SLUGS for sql in task_sql(slug, "halted", None)]
    config = (template / "orchestrator.toml").read_text()
    if "on_halt" in name:  # a stage that restores its best attempt at a halt
        config = config.replace('name = "implement"\n', 'name = "implement"\non_halt = "best"\n')
        assert 'on_halt = "best"' in config
    if "pool" in name:  # a task to claim once the pause is over
        park = park[1:]
    answer, before, after_fast, _ = both(template, tmp_path, *park, *statements, config=config)
    assert answer is None, name
    assert after_fast == before


def test_a_task_waiting_on_an_unfinished_one_is_not_due(template: Path, tmp_path: Path) -> None:
    """`add --after`: a ready task whose wait is not over is no work; both
    paths leave it where it is."""
    park = [sql for slug in SLUGS[1:] for sql in task_sql(slug, "halted", None)]
    wait = (
        "INSERT INTO task_dependencies (task_id, after_id) SELECT a.id, b.id "
        "FROM tasks AS a, tasks AS b WHERE a.slug = 't0' AND b.slug = 't1'"
    )
    answer, before, after_fast, after_full = both(template, tmp_path, *park, wait)
    assert answer == 0
    assert after_fast["tasks"] == before["tasks"] == after_full["tasks"]
    assert after_full["attempts"] == []


def test_hooks_with_an_undelivered_event_run_the_full_tick(template: Path, tmp_path: Path) -> None:
    config = (template / "orchestrator.toml").read_text() + (
        '\n[[hooks]]\nname = "log"\ncommand = ["true"]\non = ["complete"]\n'
    )
    park = [sql for slug in SLUGS for sql in task_sql(slug, "halted", None)]
    event = (
        "INSERT INTO events (kind, task_id, payload, at) SELECT 'complete', id, '{}', "
        "'2026-01-01 00:00:00.000000' FROM tasks WHERE slug = 't0'"
    )
    answer, _, _, _ = both(template, tmp_path / "with", *park, event, config=config)
    assert answer is None
    answer, _, _, _ = both(template, tmp_path / "without", *park, config=config)
    assert answer == 0


def test_a_config_no_full_tick_read_runs_the_full_tick(template: Path, tmp_path: Path) -> None:
    project = copy(template, tmp_path / "p")
    execute(project, *[sql for slug in SLUGS for sql in task_sql(slug, "halted", None)])
    env = env_of(project)
    assert try_idle_tick(["tick", "-q"], env, project.dir) is None  # no marker yet
    remember(project)
    assert try_idle_tick(["tick", "-q"], env, project.dir) == 0
    assert try_idle_tick(["tick"], env, project.dir) == 0
    for argv in (["tick", "--jobs", "2"], ["tick", "--dry-run"], ["list"], ["-v", "tick"]):
        assert try_idle_tick(argv, env, project.dir) is None, argv
    assert (
        try_idle_tick(["tick", "-q"], {**env, "ORCHESTRATOR_TEST_FAULT": "x"}, project.dir) is None
    )
    project.config.write_text(project.config.read_text() + "\n# edited\n")
    assert try_idle_tick(["tick", "-q"], env, project.dir) is None  # not read in this form
    other = {**env, "ORCHESTRATOR_DB_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    remember(project)
    assert try_idle_tick(["tick", "-q"], other, project.dir) is None


def test_idle_cron_ticks_share_one_row_that_doctor_reads(template: Path, tmp_path: Path) -> None:
    """Real processes: a full tick notes the config, the next ticks are
    answered by the fast path (no SQLAlchemy imported), one idle row moves."""
    project = copy(template, tmp_path / "p")
    execute(project, *[sql for slug in SLUGS for sql in task_sql(slug, "halted", None)])
    first = project.run("tick", "-q")
    assert first.returncode == 0, first.stderr
    probe = (
        "import sys, runpy; sys.argv = ['orchestrator', 'tick', '-q']\n"
        "try:\n    runpy.run_module('orchestrator', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    print(e.code, *(m in sys.modules for m in ('sqlalchemy', 'click', 'typing')))"
    )
    fast = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert fast.stdout.split() == ["0", "False", "False", "False"], fast
    rows = project.query("SELECT count(*), max(finished_at) FROM ticks")
    assert rows[0][0] == 1
    again = project.run("tick", "-q")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    later = project.query("SELECT count(*), max(finished_at) FROM ticks")
    assert later[0][0] == 1 and later[0][1] > rows[0][1]
    doctor = project.run("doctor")
    assert "no recent tick" not in doctor.stdout + doctor.stderr


def test_a_held_lock_exits_75_as_the_full_tick_does(template: Path, tmp_path: Path) -> None:
    from orchestrator.locking import TickLock

    project = copy(template, tmp_path / "p")
    execute(project, *[sql for slug in SLUGS for sql in task_sql(slug, "halted", None)])
    remember(project)
    lock = TickLock(project.dir / "orchestrator.lock")
    lock.acquire()
    try:
        assert try_idle_tick(["tick", "-q"], env_of(project), project.dir) == 75
        # Without -q the full tick names the holder.
        assert try_idle_tick(["tick"], env_of(project), project.dir) is None
    finally:
        lock.release()


def test_the_module_knows_the_schema_at_head(template: Path) -> None:
    """A migration that adds a table or column turns the fast path off:
    read tick/idle/sql.py again (does a tick act on the new thing? add a DUE line),
    then move IDLE_REVISION and KNOWN_SCHEMA on."""
    assert schema.IDLE_REVISION == HEAD
    conn = sqlite3.connect(template / "orchestrator.db")
    try:
        found: dict[str, set[str]] = {}
        for table, column in conn.execute(sql.SCHEMA_COLUMNS):
            found.setdefault(table, set()).add(column)
    finally:
        conn.close()
    assert found == schema.KNOWN_SCHEMA


def test_the_package_imports_the_standard_library_only() -> None:
    names: set[str] = set()
    for path in Path(idle.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.level == 0 and node.module.startswith(f"{idle.__name__}."):
                    continue  # its own modules, held to the same rule here
                names.add(node.module.split(".")[0])
    assert names <= {
        "__future__",
        "os",
        "sqlite3",
        "collections",
        "pathlib",
        "typing",
        "fcntl",
        "tomllib",
        "datetime",
        "json",
        "hashlib",
        "_sha2",
        "_sha256",
    }


@pytest.mark.parametrize(
    ("name", "statements"),
    [
        (
            "a pool pause that ended with nothing of the pool to claim",
            [
                "INSERT INTO pools (name, paused_until, paused_at, pause_streak) VALUES "
                "('claude', '2026-01-01 00:00:00.000000', '2025-12-31 00:00:00.000000', 1)"
            ],
        ),
        (
            "a plateau halt on a branch, and no stage has on_halt = best",
            [
                "UPDATE tasks SET halt_reason = 'score_plateau', branch = 'task/t0' "
                "WHERE slug = 't0'"
            ],
        ),
    ],
)
def test_what_a_full_tick_leaves_as_it_found_it_is_not_due_for_ever(
    template: Path, tmp_path: Path, name: str, statements: list[str]
) -> None:
    """A state the full tick does nothing about stays as it is: were it
    "due", every cron tick from then on would be a full one (a halt waits
    for a human for days; a pool may be renamed while paused)."""
    park = [sql for slug in SLUGS for sql in task_sql(slug, "halted", None)]
    _, before, _, after_full = both(template, tmp_path, *park, *statements)
    assert after_full["tasks"] == before["tasks"] and after_full["pools"] == before["pools"]
    full = Project(
        dir=tmp_path / "full",
        db_url=f"sqlite:///{tmp_path / 'full' / 'orchestrator.db'}",
        config=tmp_path / "full" / "orchestrator.toml",
    )
    remember(full)
    assert try_idle_tick(["tick", "-q"], env_of(full), full.dir) == 0, name


def _cron_line(project: Project, *, with_db: bool) -> str:
    """What `orchestrator cron` prints for this project, as cron hands it to
    the shell (the schedule off, `\\%` back to `%`)."""
    env = project.process_env()
    if not with_db:
        del env["ORCHESTRATOR_DB_URL"]
    printed = subprocess.run(
        [sys.executable, "-m", "orchestrator", "cron"],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    line = printed.stdout.strip()
    assert ("--db" in line) == with_db, line
    return line.split(None, 5)[5].replace("\\%", "%")


@pytest.mark.parametrize("with_db", [False, True], ids=["config-only", "with-db"])
def test_the_cron_line_takes_the_idle_path(template: Path, tmp_path: Path, with_db: bool) -> None:
    """The exact line `orchestrator cron` prints, run as cron runs it (`sh -c`
    in the home folder, cron's minimal environment): the first tick is a
    full one, the next is answered without SQLAlchemy or click, as Python's
    own import log (appended to the line's log) shows."""
    project = copy(template, tmp_path / "p")
    execute(project, *[sql for slug in SLUGS for sql in task_sql(slug, "halted", None)])
    command = _cron_line(project, with_db=with_db)
    home = tmp_path / "home"
    home.mkdir()
    cron = {"HOME": str(home), "LOGNAME": "cron", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    log = project.dir / "orchestrator.log"
    imported = []
    for _ in range(2):
        log.write_text("")
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=home,
            env={**cron, "PYTHONPROFILEIMPORTTIME": "1"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, log.read_text()[-2000:]
        modules = {line.rpartition("|")[2].strip() for line in log.read_text().splitlines()}
        assert "orchestrator.tick.idle" in modules  # the import log is there
        imported.append(modules)
    assert "sqlalchemy" in imported[0]  # the first: a full tick, which notes the config
    assert "sqlalchemy" not in imported[1] and "click" not in imported[1], sorted(imported[1])
    assert project.query("SELECT count(*) FROM ticks")[0][0] == 1


def test_every_spelling_cron_uses_is_answered(template: Path, tmp_path: Path) -> None:
    """A full tick in the project's folder notes the config; the idle path
    then answers it however cron spells it: --config absolute or relative
    (or `--config=`), ORCHESTRATOR_CONFIG, -q or --quiet, from any folder,
    and --db when it names the database the full tick used."""
    project = copy(template, tmp_path / "p")
    execute(project, *[sql for slug in SLUGS for sql in task_sql(slug, "halted", None)])
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    config = str(project.config)
    remember(project, environ={}, db_given=None)
    spellings: list[tuple[list[str], dict[str, str], Path]] = [
        (["tick", "-q"], {}, project.dir),
        (["--config", config, "tick", "--quiet"], {}, elsewhere),
        (["--config", "p/orchestrator.toml", "tick", "-q"], {}, tmp_path),
        (["--config", "../p/orchestrator.toml", "tick", "--quiet"], {}, elsewhere),
        ([f"--config={config}", "tick", "-q"], {}, elsewhere),
        (["tick", "--quiet"], {"ORCHESTRATOR_CONFIG": config}, elsewhere),
        (["tick", "-q"], {"ORCHESTRATOR_CONFIG": "p/orchestrator.toml"}, tmp_path),
        (["--config", config, "tick", "-q"], {"ORCHESTRATOR_CONFIG": "/nowhere.toml"}, elsewhere),
    ]
    for argv, env, cwd in spellings:
        assert try_idle_tick(argv, env, cwd) == 0, (argv, env, cwd)
    # Another database than the one the full tick used is not vouched for.
    for argv, env in (
        (["--db", project.db_url, "--config", config, "tick", "-q"], {}),
        (["tick", "-q"], {"ORCHESTRATOR_CONFIG": config, "ORCHESTRATOR_DB_URL": project.db_url}),
    ):
        assert try_idle_tick(argv, env, elsewhere) is None, argv
    # A tick given the database's URL (the cron line with --db) notes it; a
    # relative one is anchored at the folder it was given in, as the CLI does.
    remember(project)
    relative = "sqlite:///p/orchestrator.db"
    for argv, env, cwd in (
        (["--db", project.db_url, "--config", config, "tick", "--quiet"], {}, elsewhere),
        ([f"--db={project.db_url}", f"--config={config}", "tick", "-q"], {}, elsewhere),
        (["--config", config, "tick", "-q"], {"ORCHESTRATOR_DB_URL": project.db_url}, elsewhere),
        (["--db", relative, "--config", config, "tick", "-q"], {}, tmp_path),
    ):
        assert try_idle_tick(argv, env, cwd) == 0, (argv, env, cwd)
    for argv, env, cwd in (
        (["--config", config, "tick", "-q"], {}, elsewhere),  # no --db: not the one noted
        (["--db", relative, "--config", config, "tick", "-q"], {}, elsewhere),
        (["--config", config, "-v", "tick", "-q"], {}, elsewhere),
        (["--config", config, "tick", "-q", "--jobs", "1"], {}, elsewhere),
        (["--config", "tick", "-q"], {}, elsewhere),
        (["--config", config], {}, elsewhere),
    ):
        assert try_idle_tick(argv, env, cwd) is None, (argv, env, cwd)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///orchestrator.db",
        "sqlite:///../p/o.db?timeout=5",
        "sqlite+pysqlite:///sub/./x.db",
        "sqlite:////abs/o.db",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///file:o.db?uri=true",
        "postgresql+psycopg://u@h/db",
    ],
)
def test_the_idle_path_anchors_a_database_url_as_the_cli_does(url: str) -> None:
    from orchestrator.config.files import resolve_database_url

    for base in ("/home/u", "/srv/odd%20?folder", "/"):
        assert marker.anchored_url(url, base) == resolve_database_url(url, Path(base)), (url, base)

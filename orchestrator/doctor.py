"""`orchestrator doctor`: check a setup before cron finds out the hard way.

Each check returns ok, warn or fail with one line of detail. A failure is
something that stops ticks or tasks (a database not at head, a worker binary
that is not installed, a missing prompt); a warning is something that works
today but is fragile (a lock file in /tmp, expired leases the next tick will
recover). The CLI exits 0 when nothing failed, 1 when a check failed, and 78
when the configuration itself cannot be loaded: nothing else can be checked
then.

Doctor never creates a database and never changes one; it takes the tick
lock for an instant only to learn whether a tick holds it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.config import Settings, load_settings
from orchestrator.errors import ConfigError, LockBusyError, OrchestratorError


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    level: Level
    name: str
    detail: str


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    config_loaded: bool

    @property
    def failed(self) -> bool:
        return any(check.level is Level.FAIL for check in self.checks)

    @property
    def exit_code(self) -> int:
        if not self.config_loaded:
            return ConfigError.exit_code
        return 1 if self.failed else 0


TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108 - we warn about them


def run_doctor(config: str | None, db_url: str | None) -> DoctorReport:
    """Run every check; never raises for a problem it can report."""
    try:
        settings = load_settings(config=config, db_url=db_url, require_config=True)
    except OrchestratorError as exc:
        return DoctorReport((Check(Level.FAIL, "config", str(exc)),), config_loaded=False)
    checks = [Check(Level.OK, "config", _describe_config(settings))]
    checks += _database_checks(settings)
    checks += _lock_checks(settings)
    checks += _folder_checks(settings)
    checks += _command_checks(settings)
    checks += _prompt_checks(settings)
    checks += _judge_checks(settings)
    from orchestrator.agents.doctor import agent_checks

    checks += agent_checks(settings)
    return DoctorReport(tuple(checks), config_loaded=True)


def _describe_config(settings: Settings) -> str:
    stages = sum(len(p.stages) for p in settings.pipelines.values())
    pipelines = len(settings.pipelines)
    return (
        f"{settings.config_path} ({pipelines} pipeline{'s' * (pipelines != 1)}, "
        f"{stages} stage{'s' * (stages != 1)})"
    )


# -- database ------------------------------------------------------------------------


def _database_checks(settings: Settings) -> list[Check]:
    from sqlalchemy.engine import make_url

    from orchestrator.storage.db import make_engine, translate_errors

    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    try:
        engine = make_engine(settings.database_url, busy_timeout=min(settings.busy_timeout, 5))
    except OrchestratorError as exc:
        return [Check(Level.FAIL, "database", str(exc))]
    try:
        with translate_errors():
            checks = _inspect_database(engine, shown)
            if all(check.level is not Level.FAIL for check in checks):
                checks += _parked_checks(engine, settings)
            return checks
    except OrchestratorError as exc:
        return [Check(Level.FAIL, "database", f"{shown}: {exc}")]
    except Exception as exc:  # an unknown driver error is still a report line
        return [Check(Level.FAIL, "database", f"{shown}: {type(exc).__name__}: {exc}")]
    finally:
        engine.dispose()


def _inspect_database(engine: Engine, shown: str) -> list[Check]:
    from orchestrator.storage.db import read_tx
    from orchestrator.storage.schema import HEAD, REVISIONS, current_revision

    checks: list[Check] = []
    with read_tx(engine) as conn:
        revision = current_revision(conn)
    if revision == HEAD:
        checks.append(Check(Level.OK, "database", f"{shown} at revision {HEAD} (head)"))
    elif revision is None:
        checks.append(
            Check(Level.FAIL, "database", f"{shown} is empty; run `orchestrator db upgrade`")
        )
        return checks
    elif revision in REVISIONS:
        checks.append(
            Check(
                Level.FAIL,
                "database",
                f"{shown} at revision {revision}, this code needs {HEAD}; "
                "run `orchestrator db upgrade`",
            )
        )
        return checks
    else:
        checks.append(
            Check(
                Level.FAIL,
                "database",
                f"{shown} at revision {revision}, newer than this orchestrator ({HEAD}); "
                "upgrade orchestrator",
            )
        )
        return checks
    if engine.dialect.name == "sqlite":
        checks += _sqlite_checks(engine)
    checks.append(_lease_check(engine))
    return checks


def _sqlite_checks(engine: Engine) -> list[Check]:
    from orchestrator.storage.db import read_tx

    # A read transaction: in WAL mode it neither waits for the tick's writer
    # nor holds it up, however long quick_check takes on a large file.
    with read_tx(engine) as conn:
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()).lower()
        results = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA quick_check")]
    checks = []
    if mode == "wal":
        checks.append(Check(Level.OK, "journal", "journal_mode=wal"))
    else:
        checks.append(
            Check(
                Level.WARN,
                "journal",
                f"journal_mode={mode}, not wal: readers block the tick; "
                "`orchestrator db upgrade` switches it",
            )
        )
    if results == ["ok"]:
        checks.append(Check(Level.OK, "integrity", "PRAGMA quick_check: ok"))
    else:
        first = results[0] if results else "no answer"
        checks.append(
            Check(
                Level.FAIL,
                "integrity",
                f"PRAGMA quick_check: {first} ({len(results)} problems); restore a backup",
            )
        )
    return checks


def _lease_check(engine: Engine) -> Check:
    from orchestrator.storage import repo
    from orchestrator.storage.db import db_now, read_tx

    with read_tx(engine) as conn:
        now = db_now(conn)
        unfinished = repo.unfinished_attempts(conn)
    if not unfinished:
        return Check(Level.OK, "attempts", "no unfinished attempts")
    expired = [a for a in unfinished if a.lease_expires_at < now]
    if expired:
        first = expired[0]
        return Check(
            Level.WARN,
            "attempts",
            f"{len(expired)} of {len(unfinished)} unfinished attempts have expired leases "
            f"(e.g. attempt {first.id} at {first.stage}, on {first.host}); "
            "the next tick recovers them as crashed",
        )
    return Check(
        Level.OK,
        "attempts",
        f"{len(unfinished)} attempts running under live leases",
    )


def _parked_checks(engine: Engine, settings: Settings) -> list[Check]:
    """Tasks at a pipeline or stage the config no longer has: the next tick
    halts them as `unknown_stage`; better to learn it now, with their names."""
    from sqlalchemy import select

    from orchestrator.storage import repo

    t = repo.tasks
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.slug, t.c.pipeline, t.c.stage).where(
                t.c.status.not_in(("complete", "cancelled"))
            )
        ).all()
    lost: list[str] = []
    for slug, pipeline_name, stage in rows:
        pipeline = settings.pipeline(pipeline_name)
        if pipeline is None or pipeline.stage(stage) is None:
            lost.append(f"{slug} ({pipeline_name}.{stage})")
    if not lost:
        return []
    shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    return [
        Check(
            Level.WARN,
            "stages",
            f"{len(lost)} unfinished task(s) at a stage the config no longer has: {shown}; "
            "the next tick halts them as unknown_stage (restore the stage, or cancel them)",
        )
    ]


# -- lock ------------------------------------------------------------------------------


def _in_temp_folder(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    temps = {Path(os.path.realpath(p)) for p in (*TEMP_FOLDERS, tempfile.gettempdir())}
    return any(real.is_relative_to(temp) for temp in temps)


def _lock_checks(settings: Settings) -> list[Check]:
    from orchestrator.locking import TickLock

    path = settings.lock_file
    checks: list[Check] = []
    lock = TickLock(path)
    try:
        lock.acquire()
    except LockBusyError:
        checks.append(Check(Level.OK, "lock", f"{path} held by {lock.holder()} (a tick runs)"))
    except OrchestratorError as exc:
        checks.append(Check(Level.FAIL, "lock", str(exc)))
    else:
        lock.release()
        checks.append(Check(Level.OK, "lock", f"{path} free"))
    if _in_temp_folder(path):
        # "Beside the config" is no advice when the config is in /tmp too.
        where = (
            "move the project out of the temporary folder, or set lock_file to a path "
            "outside it (e.g. under ~/.cache)"
            if _in_temp_folder(settings.base_dir)
            else "set lock_file beside the config"
        )
        checks.append(
            Check(
                Level.WARN,
                "lock",
                f"{path} is in a temporary folder: a cleaner may delete it while a tick "
                f"holds it, and services with a private /tmp see another file; {where}",
            )
        )
    return checks


# -- folders, commands, prompts --------------------------------------------------------


def _writable_or_creatable(path: Path) -> bool:
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def _folder_checks(settings: Settings) -> list[Check]:
    checks = []
    for key, path in (
        ("workspace_root", settings.workspace_root),
        ("state_root", settings.state_root),
    ):
        if _writable_or_creatable(path):
            checks.append(Check(Level.OK, "folders", f"{key} {path} is writable"))
        else:
            checks.append(Check(Level.FAIL, "folders", f"{key} {path} cannot be written"))
    return checks


def _commands(settings: Settings) -> Iterator[tuple[str, tuple[str, ...]]]:
    for pipeline in settings.pipelines.values():
        if pipeline.setup is not None:
            yield f"{pipeline.name}.setup", pipeline.setup
        for stage in pipeline.stages:
            for role, argv in (("worker", stage.worker), ("verifier", stage.verifier)):
                if argv is not None:
                    yield f"{pipeline.name}.{stage.name}.{role}", argv


def command_check(where: str, argv: tuple[str, ...], config_dir: Path) -> Check:
    """Does argv[0] name a program that will start?

    Bare names are looked up on PATH (cron's PATH is shorter than a login
    shell's: check under the same PATH cron uses). Commands run in the
    task's workspace, so a relative path is resolved there at run time, not
    beside the config: it is a warning, since doctor cannot know it exists.
    """
    program = argv[0]
    if "{" in program:
        return Check(
            Level.WARN, "command", f"{where}: {program!r} depends on the task; not checked"
        )
    if "/" not in program:
        found = shutil.which(program)
        if found is None:
            return Check(Level.FAIL, "command", f"{where}: {program!r} not found on PATH")
        return _script_args(where, argv, found)
    path = Path(program).expanduser()
    if not path.is_absolute():
        beside = config_dir / path
        hint = " (it exists beside the config; write it absolute)" if beside.exists() else ""
        return Check(
            Level.WARN,
            "command",
            f"{where}: {program!r} is relative, so it is looked up in each task's workspace{hint}",
        )
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Check(Level.FAIL, "command", f"{where}: {program} is not an executable file")
    return _script_args(where, argv, str(path))


def _script_args(where: str, argv: tuple[str, ...], found: str) -> Check:
    """Also catch `python3 /gone/judge.py`: an absolute script argument that is missing."""
    for arg in argv[1:]:
        if (
            arg.startswith("/")
            and "{" not in arg
            and arg.endswith((".py", ".sh"))
            and not Path(arg).exists()
        ):
            return Check(Level.FAIL, "command", f"{where}: script {arg} does not exist")
    return Check(Level.OK, "command", f"{where}: {found}")


def _command_checks(settings: Settings) -> list[Check]:
    seen: set[tuple[str, ...]] = set()
    checks = []
    for where, template in _commands(settings):
        argv = tuple(arg.replace("{config_dir}", str(settings.base_dir)) for arg in template)
        # The same program (and script) in seven stages is one line, not seven.
        key = (argv[0], *(arg for arg in argv[1:] if arg.endswith((".py", ".sh"))))
        if key in seen:
            continue
        seen.add(key)
        checks.append(command_check(where, argv, settings.base_dir))
    return checks


def _prompt_checks(settings: Settings) -> list[Check]:
    checks = []
    found = 0
    for pipeline in settings.pipelines.values():
        for stage in pipeline.stages:
            if stage.prompt is None:
                continue
            if stage.prompt.is_file() and os.access(stage.prompt, os.R_OK):
                found += 1
            else:
                where = f"{pipeline.name}.{stage.name}.prompt"
                checks.append(Check(Level.FAIL, "prompts", f"{where}: {stage.prompt} not found"))
    if found:
        checks.insert(0, Check(Level.OK, "prompts", f"{found} prompt templates found"))
    return checks


PYTEST_JUDGE = "pytest_judge.py"


def _judge_checks(settings: Settings) -> list[Check]:
    """Does pytest import in the interpreter the pytest judge will use?

    A judge that cannot run its tool fails every attempt (it prints no
    verdict); the interpreter is `--python X` when given, else the one
    running the judge. Checked once per interpreter, in the config's folder.
    """
    seen: set[str] = set()
    checks = []
    for where, argv in _commands(settings):
        if not any(Path(arg).name == PYTEST_JUDGE for arg in argv[1:]):
            continue
        index = argv.index("--python") if "--python" in argv else -1
        python = argv[index + 1] if 0 <= index < len(argv) - 1 else argv[0]
        if python in seen:
            continue
        seen.add(python)
        checks.append(_pytest_imports(where, python, settings.base_dir))
    return checks


def _pytest_imports(where: str, python: str, folder: Path) -> Check:
    import subprocess

    if "{" in python:
        return Check(Level.WARN, "judge", f"{where}: {python!r} depends on the task; not checked")
    found = shutil.which(python) if "/" not in python else python
    if found is None or not Path(found).is_absolute():
        return Check(Level.WARN, "judge", f"{where}: {python!r} is not found here; not checked")
    try:
        probe = subprocess.run(
            [found, "-c", "import pytest"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(Level.FAIL, "judge", f"{where}: cannot run {found}: {exc}")
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["(no output)"]
        return Check(
            Level.FAIL,
            "judge",
            f"{where}: pytest does not import in {found} ({lines[-1][:200]}); "
            "give the judge --python with your project's interpreter",
        )
    return Check(Level.OK, "judge", f"{where}: pytest imports in {found}")


__all__ = ["Check", "DoctorReport", "Level", "command_check", "run_doctor"]

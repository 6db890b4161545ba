"""`orchestrator cron`: the crontab line that runs a tick, and installing it.

The line is marked as ours, so installing it again replaces it instead of
adding a second tick to the user's crontab.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from orchestrator.config import (
    Settings,
)
from orchestrator.errors import RefusedError

LOG_NAME = "orchestrator.log"


def cron_schedule(every: int) -> str:
    """Minutes → the five crontab fields; ValueError for what cron cannot say."""
    if every == 1:
        return "* * * * *"
    if 1 < every < 60:
        return f"*/{every} * * * *"
    hours, rest = divmod(every, 60)
    if rest == 0 and 1 <= hours <= 24 and 24 % hours == 0:
        return "0 * * * *" if hours == 1 else "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    raise ValueError(
        f"cron cannot run every {every} minutes; use 1-59, or whole hours that divide 24"
    )


def schedule_seconds(fields: str) -> int | None:
    """The five crontab fields `cron_schedule` writes -> seconds between
    ticks; None for a schedule it does not write (a hand-made one)."""
    parts = fields.split()
    if len(parts) != 5 or parts[2:] != ["*", "*", "*"]:
        return None
    minute, hour = parts[:2]
    if hour == "*":
        if minute == "*":
            return 60
        if minute == "0":
            return 3600
        return int(minute[2:]) * 60 if _every(minute) else None
    if minute != "0":
        return None
    if hour == "0":
        return 86400
    return int(hour[2:]) * 3600 if _every(hour) else None


def _every(field: str) -> bool:
    return field.startswith("*/") and field[2:].isdigit() and int(field[2:]) > 0


def installed_line(config: Path) -> str | None:
    """This project's line in the user's crontab; None when there is none
    (or no crontab program to ask)."""
    try:
        text = read_crontab()
    except RefusedError:
        return None
    mark = f"{CRON_MARK} {config}"
    return next((line for line in text.splitlines() if line.rstrip().endswith(mark)), None)


def orchestrator_command() -> list[str]:
    """The console script beside this Python, else `python -m orchestrator`."""
    script = Path(sys.executable).parent / "orchestrator"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "orchestrator"]


def shown_program() -> str:
    """How to call orchestrator from a shell here: `orchestrator` when PATH finds
    this installation, else the absolute path (a venv that is not activated)."""
    import shlex

    command = orchestrator_command()
    if len(command) == 1:
        on_path = shutil.which("orchestrator")
        if on_path is not None and Path(on_path).resolve() == Path(command[0]).resolve():
            return "orchestrator"
    return " ".join(shlex.quote(word) for word in command)


def cron_line(settings: Settings, every: int, db_url: str | None, path: str) -> str:
    """One crontab line: absolute paths, `tick --quiet`, output appended to a log.

    Cron runs with a bare PATH (/usr/bin:/bin), where `claude` or `codex`
    are rarely found, so the line carries the PATH given here. `%` is special
    in crontab (it ends the command), so it is escaped.
    """
    import shlex

    assert settings.config_path is not None
    log = settings.config_path.parent / LOG_NAME
    words = [*orchestrator_command(), "--config", str(settings.config_path)]
    if db_url:
        words += ["--db", db_url]
    words += ["tick", "--quiet"]
    command = f"PATH={shlex.quote(path)} " + " ".join(shlex.quote(w) for w in words)
    command += f" >> {shlex.quote(str(log))} 2>&1"
    return f"{cron_schedule(every)} {command.replace('%', chr(92) + '%')}"


def cron_path(path: str) -> tuple[str, list[str]]:
    """The PATH the line carries, and the entries left out of it.

    Only absolute folders, each once, first place kept (a shell's PATH often
    repeats folders: every sourced profile prepends again). A relative entry
    (`.`, `bin`) or an empty one (the working folder) is dropped: cron's
    tick would resolve it against its own folder, where a worker could plant
    a program that a later tick runs."""
    seen: dict[str, None] = {}
    dropped: list[str] = []
    for folder in path.split(os.pathsep):
        if folder and Path(folder).is_absolute():
            seen.setdefault(folder, None)
        elif folder not in dropped:
            dropped.append(folder)
    return os.pathsep.join(seen), dropped


def dropped_entries(dropped: list[str]) -> str:
    """One line naming the PATH entries `cron_path` left out."""
    named = ", ".join(
        repr(entry) if entry else "'' (empty: the working folder)" for entry in dropped
    )
    return (
        f"PATH entries left out of the line, as they are not absolute: {named} "
        "(cron's tick would look them up in its own working folder)"
    )


def unstartable(settings: Settings, path: str) -> list[tuple[str, str]]:
    """(where, program) of each command the line's tick would not find on
    `path`: a stage's worker or verifier, a pipeline's setup or land_check,
    by argv[0] as the runner resolves it. `path` is the printed one (absolute
    folders only), so the answer does not depend on the current folder. A
    relative program path (looked up in the task's workspace) or a
    placeholder is the task's to say, not checked."""
    found: list[tuple[str, str]] = []
    for pipeline in settings.pipelines.values():
        commands = [("setup", pipeline.setup), ("land_check", pipeline.landing.check)]
        for stage in pipeline.stages:
            commands += [(f"{stage.name}.worker", stage.worker)]
            commands += [(f"{stage.name}.verifier", stage.verifier)]
        for role, argv in commands:
            if not argv:
                continue
            program = argv[0].replace("{config_dir}", str(settings.base_dir))
            if "{" in program or ("/" in program and not program.startswith("/")):
                continue
            if shutil.which(program, path=path) is None:
                found.append((f"{pipeline.name}.{role}", argv[0]))
    return found


CRON_MARK = "# orchestrator-cron"


def _ours(text: str, printed: str, config: Path) -> bool:
    """A crontab line of this config's: the one `--install` marked, or exactly
    the line `cron` prints (pasted by hand before `--install` existed). A
    line the user wrote themselves, even for this config, is theirs."""
    return text.rstrip().endswith(f"{CRON_MARK} {config}") or text.strip() == printed.strip()


def edit_crontab(
    current: str, line: str | None, config: Path, printed: str | None = None
) -> tuple[str, str]:
    """The crontab with this config's line put in (`line`) or taken out (None),
    and what changed: `installed`, `replaced`, `unchanged`, `removed` or
    `absent`. `printed` is the line `cron` prints (default: `line`). The
    first line of ours is replaced in place; any other of ours is dropped,
    so the line is never duplicated; other lines are untouched."""
    printed = printed if printed is not None else (line or "")
    lines = current.splitlines()
    ours = [i for i, text in enumerate(lines) if _ours(text, printed, config)]
    if line is None:
        kept = [text for i, text in enumerate(lines) if i not in ours]
        return ("\n".join(kept) + "\n" if kept else ""), ("removed" if ours else "absent")
    marked = f"{line} {CRON_MARK} {config}"
    if not ours:
        return "\n".join([*lines, marked]) + "\n", "installed"
    if len(ours) == 1 and lines[ours[0]] == marked:
        return current, "unchanged"
    first = ours[0]
    edited = [
        marked if i == first else text
        for i, text in enumerate(lines)
        if i == first or i not in ours
    ]
    return "\n".join(edited) + "\n", "replaced"


def read_crontab() -> str:
    """The user's crontab (`crontab -l`); empty when they have none."""

    done = _crontab(["-l"], None)
    if done.returncode != 0:
        if "no crontab" in done.stderr.lower():
            return ""
        raise RefusedError(f"crontab -l failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def write_crontab(text: str) -> None:
    done = _crontab(["-"], text)
    if done.returncode != 0:
        raise RefusedError(f"crontab - failed: {done.stderr.strip() or done.returncode}")


def _crontab(args: list[str], stdin: str | None) -> subprocess.CompletedProcess[str]:

    program = shutil.which("crontab")
    if program is None:
        raise RefusedError("crontab is not installed here (no `crontab` on PATH)")
    try:
        # surrogateescape: a crontab in another encoding goes back byte for byte.
        return subprocess.run(
            [program, *args],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        raise RefusedError(f"crontab {' '.join(args)} did not answer in 60 s") from exc

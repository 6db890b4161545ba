"""The newcomer's second hour: every message says what to do, and no advice
loses work. Each test drives the CLI (CliRunner or a real process) the way a
new user would, and checks what they would read and what is left on disk."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path

from click.testing import CliRunner, Result
from support import Project, cli_json, copy_database, make_project

from orchestrator.cli import cli


def invoke(args: list[str], cwd: Path, **env: str | None) -> Result:
    """Run the CLI in-process from `cwd`, with no ORCHESTRATOR_* from the outside."""
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORCHESTRATOR_")}
    clean.update(env)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=clean, catch_exceptions=False)
    finally:
        os.chdir(old)


# -- 1. no config: say so, create nothing ------------------------------------------


def test_commands_in_a_folder_without_config_say_the_config_is_missing(tmp_path: Path) -> None:
    commands = [
        ["list"],
        ["show", "fix-calc"],
        ["add", "fix-calc", "--title", "T"],
        ["history"],
        ["scores", "fix-calc"],
        ["sql", "SELECT 1"],
        ["approve", "fix-calc"],
        ["db", "upgrade"],
        ["db", "current"],
        ["tick"],
        ["cron"],
    ]
    for args in commands:
        result = invoke(args, tmp_path)
        assert result.exit_code == 78, (args, result.output)
        assert "no orchestrator.toml found" in result.stderr, (args, result.stderr)
        assert "orchestrator init" in result.stderr, (args, result.stderr)
        assert "db upgrade" not in result.stderr, (args, result.stderr)
    assert list(tmp_path.iterdir()) == []  # no stray database, no lock


def test_db_given_on_the_command_line_needs_no_config(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert invoke(["--db", url, "db", "upgrade"], tmp_path).exit_code == 0
    listed = invoke(["--db", url, "list"], tmp_path)
    assert listed.exit_code == 0, listed.output


# -- 2. advice that loses work -----------------------------------------------------


def test_a_missing_database_beside_a_config_suggests_only_db_upgrade(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    (tmp_path / "orchestrator.db").unlink()
    result = invoke(["list"], tmp_path)
    assert result.exit_code == 78
    assert "orchestrator db upgrade" in result.stderr
    assert "init" not in result.stderr
    upgraded = invoke(["db", "upgrade"], tmp_path)
    assert upgraded.exit_code == 0, upgraded.output
    assert invoke(["list"], tmp_path).exit_code == 0


def test_init_force_keeps_the_replaced_config_as_a_backup(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    config = tmp_path / "orchestrator.toml"
    edited = config.read_text() + "\n# my edit\n"
    config.write_text(edited)

    refused = invoke(["init"], tmp_path)
    assert refused.exit_code == 1
    assert ".bak" in refused.stderr

    forced = invoke(["init", "--force"], tmp_path)
    assert forced.exit_code == 0, forced.output
    assert "# my edit" not in config.read_text()
    assert (tmp_path / "orchestrator.toml.bak").read_text() == edited
    assert "saved orchestrator.toml.bak" in forced.stdout

    config.write_text(edited + "# second edit\n")
    again = invoke(["init", "--force"], tmp_path)
    assert again.exit_code == 0
    assert (tmp_path / "orchestrator.toml.bak").read_text() == edited  # never overwritten
    assert "# second edit" in (tmp_path / "orchestrator.toml.bak.1").read_text()
    assert "saved orchestrator.toml.bak.1" in again.stdout


# -- 11. a trailing JSON object does not beat the verdict ---------------------------


def test_verdict_is_the_last_object_with_pass_or_score(tmp_path: Path) -> None:
    text = 'My verdict: {"pass": true, "score": 0.9}\nPS: set {"debug": false} in prod\n'
    result = CliRunner().invoke(cli, ["verdict", "-"], input=text)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "pass": True,
        "score": 0.9,
        "reasons": [],
        "next_hint": "",
    }
    # A fenced verdict followed by a fenced config example: the verdict wins.
    fenced = (
        '```json\n{"pass": false, "score": 0.4}\n```\nexample:\n```json\n{"debug": true}\n```\n'
    )
    found = json.loads(CliRunner().invoke(cli, ["verdict"], input=fenced).stdout)
    assert (found["pass"], found["score"]) == (False, 0.4)
    # No object names pass or score: the last object, as before.
    neither = 'first {"reasons": ["a"]} then {"next_hint": "b"}'
    found = json.loads(CliRunner().invoke(cli, ["verdict"], input=neither).stdout)
    assert (found["pass"], found["score"], found["next_hint"]) == (False, 0.0, "b")
    helped = CliRunner().invoke(cli, ["verdict", "--help"])
    assert '"pass", "score" or "pending" key' in " ".join(helped.stdout.split())


# -- 13. a linter that exits 1 with findings left still reaches its verifier ----------

LINT_STAGES = """
[[pipelines.default.stages]]
name = "lint"
worker = ["sh", "-c", "echo 'found 2 errors' >&2; exit {code}"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": false, \\"score\\": 0.5}}'"]
{extra}
"""


def lint_project(tmp_path: Path, code: int, extra: str, template_db: Path) -> Project:
    project = make_project(
        tmp_path / "proj",
        copy_database(template_db, tmp_path / "proj" / "o.db"),
        LINT_STAGES.format(code=code, extra=extra),
    )
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "lint-me", "--title", "T").exit_code == 0
    return project


def test_worker_ok_exit_lets_listed_statuses_go_on_to_the_verifier(
    tmp_path: Path, template_db: Path
) -> None:
    project = lint_project(tmp_path, 1, "worker_ok_exit = [0, 1]", template_db)
    assert project.cli("tick", "--max-tasks", "1").exit_code == 0
    attempt = cli_json(project.cli("show", "lint-me", "--json"))["attempts"][0]
    assert (attempt["outcome"], attempt["score"]) == ("failed", 0.5)
    assert (attempt["worker_exit"], attempt["verifier_exit"]) == (1, 0)


def test_a_worker_exit_not_listed_is_still_a_worker_error(
    tmp_path: Path, template_db: Path
) -> None:
    project = lint_project(tmp_path, 2, "worker_ok_exit = [0, 1]", template_db)
    assert project.cli("tick", "--max-tasks", "1").exit_code == 0
    attempt = cli_json(project.cli("show", "lint-me", "--json"))["attempts"][0]
    assert attempt["outcome"] == "worker_error"
    assert attempt["error"] == "worker exited 2: found 2 errors"
    assert attempt["verifier_exit"] is None


def test_worker_ok_exit_must_list_statuses_including_zero(
    tmp_path: Path, template_db: Path
) -> None:
    project = lint_project(tmp_path, 0, "", template_db)
    project.write_config(LINT_STAGES.format(code=1, extra="worker_ok_exit = [1]"))
    result = project.cli("list")
    assert result.exit_code == 78
    assert "pipelines.default.stages[0] (lint).worker_ok_exit" in result.stderr
    assert "includes 0" in result.stderr


# -- 4. why a verifier failed ----------------------------------------------------


def test_invalid_verdict_error_carries_the_exit_status_and_stderr(
    tmp_path: Path, template_db: Path
) -> None:
    stages = """
    [[pipelines.default.stages]]
    name = "implement"
    worker = ["true"]
    verifier = ["python3", "/nowhere/judges/pytest_judge.py"]
    """
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    assert project.cli("tick", "--max-tasks", "1").exit_code == 0
    attempt = cli_json(project.cli("show", "fix-calc", "--json"))["attempts"][0]
    assert attempt["outcome"] == "invalid_verdict"
    assert attempt["error"].startswith(
        "no JSON verdict in the verifier's output (verifier exited 2): "
    )
    assert "can't open file" in attempt["error"]
    assert (attempt["worker_exit"], attempt["verifier_exit"]) == (0, 2)
    folder = Path(attempt["state_dir"])
    assert folder == project.dir / "state" / "fix-calc" / "implement-001"
    assert "can't open file" in (folder / "verifier.err").read_text()
    shown = project.cli("show", "fix-calc")
    assert "state/fix-calc/implement-001/" in shown.stdout
    assert "verifier exited 2" in shown.stdout


# -- 8. people's notes in show -------------------------------------------------------


def test_show_prints_approve_and_reject_notes(project: Project) -> None:
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    assert project.cli("tick").exit_code == 0
    rejected = project.cli("reject", "fix-calc", "--note", "also cover negative numbers")
    assert rejected.exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.cli("approve", "fix-calc", "--note", "plan looks right").exit_code == 0
    shown = project.cli("show", "fix-calc").stdout
    assert "note: also cover negative numbers" in shown
    assert "approved; note: plan looks right" in shown


# -- 9. say what approve needs ---------------------------------------------------------


def test_approve_of_a_ready_task_says_what_approve_needs(project: Project) -> None:
    assert project.cli("add", "hangs", "--title", "T").exit_code == 0
    refused = project.cli("approve", "hangs")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: cannot approve 'hangs': it is at `research` (ready); "
        "approve needs `:awaiting_approval`\n"
    )


# -- 10. history --limit is the newest rows -----------------------------------------------


def test_history_limit_keeps_the_newest_rows_oldest_first(project: Project) -> None:
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    assert project.cli("tick").exit_code == 0  # claim, await_approval
    assert project.cli("approve", "fix-calc").exit_code == 0
    every = cli_json(project.cli("history", "fix-calc", "--json"))
    assert [r["event"] for r in every] == ["add", "claim", "await_approval", "approve"]
    newest = cli_json(project.cli("history", "fix-calc", "--limit", "2", "--json"))
    assert [r["event"] for r in newest] == ["await_approval", "approve"]
    table = project.cli("history", "--limit", "1").stdout.splitlines()
    assert len(table) == 2 and " approve " in table[1]


# -- 6. typos are errors with "did you mean" ---------------------------------------------


def test_unknown_tasks_stages_and_states_are_errors_with_a_suggestion(project: Project) -> None:
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    cases = [
        (["tick", "--task", "fix-clac"], "no task 'fix-clac' (did you mean 'fix-calc'?)"),
        (["tick", "--task", "fix-clac", "--dry-run"], "did you mean 'fix-calc'?"),
        (["show", "fix-clac"], "no task 'fix-clac' (did you mean 'fix-calc'?)"),
        (["approve", "fix-clac"], "did you mean 'fix-calc'?"),
        (["history", "fix-clac"], "did you mean 'fix-calc'?"),
        (
            ["scores", "fix-calc", "--stage", "implemnt"],
            "task 'fix-calc' has no stage 'implemnt' (did you mean 'implement'?)",
        ),
        (["list", "--state", "halt"], "no stage or status 'halt' (did you mean 'halted'?)"),
        (["list", "--state", "research:halt"], "(did you mean 'halted'?)"),
        (["list", "--state", "reserch"], "(did you mean 'research'?)"),
    ]
    for args, message in cases:
        result = project.cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
        assert result.stdout == "", (args, result.stdout)
    assert project.counts()["attempts"] == 0  # the typo'd tick ran nothing
    # What exists still works, a stage with no task included.
    assert project.cli("list", "--state", "implement").exit_code == 0
    assert project.cli("scores", "fix-calc", "--stage", "implement").exit_code == 0
    assert project.cli("tick", "--task", "fix-calc").exit_code == 0


# -- 5. the cron log shows the work ----------------------------------------------------

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 "


def test_quiet_tick_logs_one_stamped_line_per_attempt_and_nothing_when_idle(
    tmp_path: Path, template_db: Path
) -> None:
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    idle = project.run("tick", "--quiet")
    assert (idle.returncode, idle.stdout, idle.stderr) == (0, "", "")
    assert project.run("add", "fix-calc", "--title", "T").returncode == 0
    worked = project.run("tick", "--quiet")
    assert worked.returncode == 0, worked.stderr
    lines = worked.stdout.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        STAMP + r"fix-calc: research attempt 1 passed score 0\.90 -> research:awaiting_approval",
        lines[0],
    ), lines
    assert project.run("approve", "fix-calc").returncode == 0
    moved = project.run("tick", "--quiet").stdout.splitlines()
    assert len(moved) == 2 and all(re.match(STAMP, line) for line in moved), moved
    assert "fix-calc: research:approved -> implement" in moved[0]
    assert "-> complete" in moved[1]
    again = project.run("tick", "--quiet")
    assert (again.stdout, again.stderr) == ("", "")
    failed = project.run("tick", "--quiet", "--task", "fix-clac")
    assert failed.returncode == 1
    assert re.fullmatch(STAMP + r"Error: no task 'fix-clac'.*\n", failed.stderr), failed.stderr


# -- 7. tables cut nothing when piped; on a terminal they fit and mark the cut ----------

LONG = "no improvement: best 0.4200 before the last 3 scores [0.42, 0.42, 0.42], min_delta 0.01"


def run_on_terminal(project: Project, *args: str, columns: int) -> str:
    """Run a command with its stdout on a pseudo-terminal `columns` wide."""
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            cwd=project.dir,
            env=project.process_env({"COLUMNS": str(columns), "LINES": "50"}),
            stdout=follower,
            stderr=subprocess.DEVNULL,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_tables_cut_nothing_when_piped_and_fit_a_terminal(project: Project) -> None:
    query = f"SELECT 'fix-calc' AS task, '{LONG}' AS reason"
    piped = project.run("sql", query)
    assert piped.returncode == 0
    assert LONG in piped.stdout
    assert "…" not in piped.stdout
    shown = run_on_terminal(project, "sql", query, columns=60)
    lines = shown.splitlines()
    assert all(len(line) <= 60 for line in lines), lines
    assert lines[1].startswith("fix-calc")
    assert lines[1].endswith("…")
    assert LONG[:20] in lines[1]
    wide = run_on_terminal(project, "sql", query, columns=200)
    assert LONG in wide and "…" not in wide


# -- 3. a judge that cannot run its tool prints no verdict ------------------------------


def test_pytest_judge_without_pytest_fails_loudly_and_doctor_says_so(tmp_path: Path) -> None:
    import sys

    folder = tmp_path / "proj"
    folder.mkdir()
    assert invoke(["init"], folder).exit_code == 0
    template = (folder / "orchestrator.toml").read_text()
    assert '"--python", "python3"]' in template and "YOUR project's Python" in template
    # An interpreter with no site-packages: pytest is not there.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    judge = folder / "judges" / "pytest_judge.py"

    def configure(python: Path) -> Project:
        stages = f"""
        [[pipelines.default.stages]]
        name = "implement"
        worker = ["true"]
        verifier = ["{sys.executable}", "{judge}", "--python", "{python}"]
        """
        return make_project(folder, f"sqlite:///{folder / 'orchestrator.db'}", stages)

    project = configure(bare)
    doctor = project.cli("doctor")
    assert doctor.exit_code == 1
    assert f"fail  judge      default.implement.verifier: pytest does not import in {bare}" in (
        doctor.stdout
    )
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    assert project.cli("tick", "--max-tasks", "1").exit_code == 0
    data = cli_json(project.cli("show", "fix-calc", "--json"))
    attempt = data["attempts"][0]
    assert attempt["outcome"] == "invalid_verdict"
    assert attempt["verifier_exit"] == 2
    assert "pytest does not import in" in attempt["error"]
    assert attempt["next_hint"] is None and not data["next_hint"]  # no false hint

    project = configure(Path(sys.executable))
    doctor = project.cli("doctor")
    assert f"ok    judge      default.implement.verifier: pytest imports in {sys.executable}" in (
        doctor.stdout
    )


# -- 12. cron --install / --uninstall -----------------------------------------------------

FAKE_CRONTAB = """#!/bin/sh
# A stand-in for crontab(1) that keeps "the" crontab in $FAKE_CRONTAB_FILE.
if [ "$1" = "-l" ]; then
    if [ -f "$FAKE_CRONTAB_FILE" ]; then cat "$FAKE_CRONTAB_FILE"; exit 0; fi
    echo "no crontab for $(id -un)" >&2; exit 1
fi
if [ "$1" = "-" ]; then cat > "$FAKE_CRONTAB_FILE"; exit 0; fi
exit 2
"""


def agents_on_path(bin_dir: Path) -> None:
    """Stand-ins for the agents `init`'s stages run, where the line's PATH finds them."""
    for name in ("claude", "codex"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)


def test_cron_install_and_uninstall_edit_the_crontab_idempotently(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "crontab").write_text(FAKE_CRONTAB)
    (bin_dir / "crontab").chmod(0o755)
    agents_on_path(bin_dir)  # or `--install` refuses the line (`cron` checks its PATH)
    store = tmp_path / "crontab.txt"
    folder = tmp_path / "proj"
    folder.mkdir()
    assert invoke(["init"], folder).exit_code == 0
    path = f"{bin_dir}:/usr/bin:/bin"
    env = {"PATH": path, "FAKE_CRONTAB_FILE": str(store)}

    first = invoke(["cron", "--install"], folder, **env)
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("installed in your crontab:")
    [line] = store.read_text().splitlines()
    assert line.endswith(f"2>&1 # orchestrator-cron {folder / 'orchestrator.toml'}")
    assert " tick --quiet " in line

    store.write_text("MAILTO=me\n" + store.read_text() + "0 3 * * * backup\n")
    again = invoke(["cron", "--install"], folder, **env)
    assert again.stdout.startswith("already in your crontab:")
    assert store.read_text().splitlines() == ["MAILTO=me", line, "0 3 * * * backup"]

    every5 = invoke(["cron", "--install", "--every", "5"], folder, **env)
    assert every5.stdout.startswith("replaced this project's line")
    lines = store.read_text().splitlines()
    assert len(lines) == 3 and lines[0] == "MAILTO=me" and lines[2] == "0 3 * * * backup"
    assert lines[1].startswith("*/5 * * * * ")  # in place, not duplicated

    removed = invoke(["cron", "--uninstall"], folder, **env)
    assert removed.stdout.startswith("removed this project's line")
    assert store.read_text().splitlines() == ["MAILTO=me", "0 3 * * * backup"]
    absent = invoke(["cron", "--uninstall"], folder, **env)
    assert absent.exit_code == 0 and "nothing changed" in absent.stdout

    # A line installed by hand from the printed one is this project's too.
    printed = invoke(["cron"], folder, **env).stdout.strip()
    store.write_text(printed + "\n")
    replaced = invoke(["cron", "--install"], folder, **env)
    assert replaced.stdout.startswith("replaced")
    assert len(store.read_text().splitlines()) == 1
    assert invoke(["cron", "--install", "--uninstall"], folder, **env).exit_code == 2

    # Lines the user wrote for this config are theirs: never replaced or removed.
    config = folder / "orchestrator.toml"
    own = [
        f"0 9 * * 1-5 /usr/local/bin/orchestrator --config {config} tick --task weekly --quiet",
        f"30 2 * * * /usr/local/bin/orchestrator --config {config} tick --dry-run | mail me",
    ]
    store.write_text("\n".join(own) + "\n")
    assert invoke(["cron", "--install"], folder, **env).stdout.startswith("installed")
    assert store.read_text().splitlines()[:2] == own
    assert invoke(["cron", "--uninstall"], folder, **env).stdout.startswith("removed")
    assert store.read_text().splitlines() == own


def test_cron_install_keeps_a_crontab_in_another_encoding(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "crontab").write_text(FAKE_CRONTAB)
    (bin_dir / "crontab").chmod(0o755)
    agents_on_path(bin_dir)  # or `--install` refuses the line (`cron` checks its PATH)
    store = tmp_path / "crontab.txt"
    store.write_bytes(b"# caf\xe9\n0 3 * * * backup\n")
    folder = tmp_path / "proj"
    folder.mkdir()
    assert invoke(["init"], folder).exit_code == 0
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_CRONTAB_FILE": str(store)}
    installed = invoke(["cron", "--install"], folder, **env)
    assert installed.exit_code == 0, installed.output
    assert store.read_bytes().startswith(b"# caf\xe9\n0 3 * * * backup\n")


# -- 14. the smaller ones ----------------------------------------------------------------


def test_doctor_lock_advice_for_a_project_in_a_temporary_folder(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0  # tmp_path is under the temp folder
    lines = [line for line in invoke(["doctor"], tmp_path).stdout.splitlines() if "warn" in line]
    [lock] = [line for line in lines if " lock " in line]
    assert "move the project out of the temporary folder" in lock
    assert "beside the config" not in lock


def test_add_from_names_what_it_added_and_the_line_of_a_bad_slug(project: Project) -> None:
    good = '{"slug": "fix-a", "title": "A"}\n{"slug": "fix-b", "title": "B"}\n'
    added = project.cli("add", "--from", "-", input=good)
    assert added.exit_code == 0
    assert added.stdout == "added 2 tasks: fix-a, fix-b\n"
    bad = '{"slug": "fix-c", "title": "C"}\n\n{"slug": "Fix D", "title": "D"}\n'
    refused = project.cli("add", "--from", "-", input=bad)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: - line 3: slug 'Fix D': ")
    assert [r["slug"] for r in cli_json(project.cli("list", "--json"))] == ["fix-a", "fix-b"]


def test_show_and_history_print_one_time_format(project: Project) -> None:
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    second = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
    [row] = project.cli("history").stdout.splitlines()[1:]
    assert re.match(r"fix-calc\s+1\s+" + second, row), row
    shown = project.cli("show", "fix-calc").stdout
    assert re.search(r"\n1\s+" + second + r"\s*research", shown), shown


def test_db_upgrade_of_a_missing_file_says_created(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    (tmp_path / "orchestrator.db").unlink()
    upgraded = invoke(["db", "upgrade"], tmp_path)
    assert upgraded.exit_code == 0
    assert upgraded.stdout.endswith(" (created)\n")
    assert "was empty" not in upgraded.stdout
    assert invoke(["db", "upgrade"], tmp_path).stdout.startswith("database at ")


def test_dry_run_says_setup_runs_first(tmp_path: Path, template_db: Path) -> None:
    stages = """
    [pipelines.default]
    setup = ["git", "worktree", "add", "{workspace}"]

    [[pipelines.default.stages]]
    name = "implement"
    worker = ["true"]
    """
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    dry = project.cli("tick", "--dry-run").stdout
    workspace = project.dir / "tasks" / "fix-calc"
    assert (
        "fix-calc: would run implement attempt 1: setup ['git', 'worktree', 'add', "
        f"'{workspace}'] first (no workspace yet); worker ['true']"
    ) in dry
    (project.dir / "tasks" / "fix-calc").mkdir(parents=True)
    assert "setup" not in project.cli("tick", "--dry-run").stdout


def test_doctor_flags_tasks_at_a_stage_the_config_lost(project: Project) -> None:
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    text = project.config.read_text().replace('name = "research"', 'name = "plan"')
    project.config.write_text(text)
    doctor = project.cli("doctor").stdout
    assert (
        "warn  stages     1 unfinished task(s) at a stage the config no longer has: "
        "fix-calc (default.research)"
    ) in doctor


def test_re_adding_a_slug_whose_old_state_folder_exists_is_refused(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    old = tmp_path / "state" / "fix-calc" / "research-001"
    old.mkdir(parents=True)
    (old / "worker.out").write_text("the old task's output")
    refused = invoke(["add", "fix-calc", "--title", "T"], tmp_path)
    assert refused.exit_code == 1
    assert "state/fix-calc holds the output of an earlier task named 'fix-calc'" in refused.stderr
    assert (old / "worker.out").read_text() == "the old task's output"
    (tmp_path / "tasks" / "fix-new").mkdir(parents=True)
    noted = invoke(["add", "fix-new", "--title", "T"], tmp_path)
    assert noted.exit_code == 0
    assert "workspace tasks/fix-new exists and is reused as it is" in noted.stderr


# -- found by the review ----------------------------------------------------------------


def test_tables_show_no_terminal_escapes_and_cut_long_text_first() -> None:
    from orchestrator.cli.output import table as _table
    from orchestrator.cli.output import text_width as _width

    at, state = "2026-12-01 04:24:36", "implement:awaiting_approval"
    note = "rejected; note: " + "x" * 200
    text = _table(["at", "to", "reason / note"], [[at, state, note]], width=100)
    _, row = text.splitlines()
    assert row.startswith(f"{at}  {state}  rejected; note: x")
    assert row.endswith("…") and _width(row) <= 100

    hostile = _table(["title"], [["x\x1b[2J\x1b[31mRED\u202eevil\tend"]], width=100)
    assert "\x1b" not in hostile and "\u202e" not in hostile and "\t" not in hostile

    wide = "宽字符标题" * 12
    table = _table(["slug", "title"], [["wide", wide]], width=80)
    assert all(_width(line) <= 80 for line in table.splitlines())
    assert table.splitlines()[1].endswith("…")


def test_a_verifier_killed_by_a_signal_is_named_so(tmp_path: Path, template_db: Path) -> None:
    stages = """
    [[pipelines.default.stages]]
    name = "implement"
    worker = ["true"]
    verifier = ["sh", "-c", "echo dying >&2; kill -KILL $$"]
    """
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    assert project.cli("tick", "--max-tasks", "1").exit_code == 0
    attempt = cli_json(project.cli("show", "t1", "--json"))["attempts"][0]
    assert attempt["error"] == (
        "no JSON verdict in the verifier's output (verifier killed by signal 9): dying"
    )


# == The third hour: what a new user still trips on after the first success =========


def test_no_config_says_where_it_looked_and_offers_cd_or_config_before_init(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    result = invoke(["list"], elsewhere)
    assert result.exit_code == 78
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"found in {elsewhere}" in message
    cd, config, init = (message.index(s) for s in ("`cd`", "--config PATH", "orchestrator init"))
    assert cd < init and config < init, message  # the existing project comes first


def paid_project(tmp_path: Path, cost: float, template_db: Path) -> Project:
    """One stage whose worker reports `cost` and whose verdict fails at 0.1."""
    script = (
        f'printf \'{{"cost_usd": {cost}}}\' > "$ORCHESTRATOR_USAGE_FILE"; '
        'echo \'{"pass": false, "score": 0.1}\''
    )
    stages = f"""
[[pipelines.default.stages]]
name = "build"
max_attempts = 2
worker = {json.dumps(["sh", "-c", script])}
"""
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "cheap", "--title", "T").returncode == 0
    assert project.run("tick").returncode == 0
    return project


def test_small_costs_print_the_same_everywhere_and_never_as_zero(
    tmp_path: Path, template_db: Path
) -> None:
    project = paid_project(tmp_path, 0.0006, template_db)
    listed = project.run("list").stdout
    scores = project.run("scores", "cheap").stdout
    shown = project.run("show", "cheap").stdout
    explained = project.run("explain", "cheap").stdout
    assert "$0.0012" in listed  # the task's two attempts
    assert scores.count("$0.0006") == 2
    assert shown.count("$0.0006") == 2 and "cost      $0.0012" in shown
    assert "$0.0012 recorded" in explained
    for text in (listed, scores, shown):
        assert "0.00 " not in text and not re.search(r"\b0\.00\b(?!\d)", text), text
    # Scripts keep the number as recorded.
    assert json.loads(project.run("scores", "cheap", "--json").stdout)[0]["cost_usd"] == 0.0006
    assert "0.0006" in project.run("scores", "cheap", "--csv").stdout.splitlines()[1]


def test_money_format_keeps_tiny_costs_apart_from_none() -> None:
    from orchestrator.domain.money import money

    assert money(0.0006) == "$0.0006"
    assert money(12.34) == "$12.3400"
    assert money(0.0) == "$0.0000"
    assert money(0.00004) == "<$0.0001"
    assert money(None) == ""


def test_show_names_only_the_capture_files_that_exist(tmp_path: Path, template_db: Path) -> None:
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "quiet", "--title", "T").returncode == 0
    assert project.run("tick").returncode == 0
    shown = project.run("show", "quiet").stdout
    line = next(x for x in shown.splitlines() if x.startswith("output of attempt"))
    named = line.split("(", 1)[1].split(";", 1)[0].split(", ")
    [folder] = (project.dir / "state").glob("**/research-001")
    on_disk = {p.name for p in folder.iterdir()}
    assert named and set(named) <= on_disk, (named, on_disk)
    assert "worker.err" not in named and "worker.err" not in on_disk  # printed nothing there


def test_dry_run_prints_the_commands_with_their_placeholders_filled(
    tmp_path: Path, template_db: Path
) -> None:
    stages = """
    [[pipelines.default.stages]]
    name = "implement"
    worker = ["sh", "{config_dir}/work.sh", "{task}", "{stage}", "{attempt}", "{workspace}"]
    verifier = ["sh", "{config_dir}/judge.sh", "--task={task}"]
    """
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "fix-calc", "--title", "T").exit_code == 0
    dry = project.cli("tick", "--dry-run").stdout
    here, workspace = project.dir, project.dir / "tasks" / "fix-calc"
    assert (
        f"worker ['sh', '{here}/work.sh', 'fix-calc', 'implement', '1', '{workspace}']; "
        f"verifier ['sh', '{here}/judge.sh', '--task=fix-calc']"
    ) in dry, dry
    assert "{" not in dry


NOT_LOGGED_IN = (
    '{"type": "result", "subtype": "success", "is_error": true, '
    '"result": "Not logged in \\u00b7 Please run /login", "total_cost_usd": 0}'
)


def test_the_cron_log_and_explain_say_what_the_agent_said(
    tmp_path: Path, template_db: Path
) -> None:
    script = f"cat > /dev/null; echo '{NOT_LOGGED_IN}'; exit 1"
    stages = f"""
[[pipelines.default.stages]]
name = "bug_find"
max_attempts = 3
output = "claude-json"
worker = {json.dumps(["sh", "-c", script])}
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 1}}'"]
"""
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), stages
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "login", "--title", "T").returncode == 0
    logged = project.run("tick", "--quiet", "--max-tasks", "1")
    [line] = logged.stdout.splitlines()
    assert re.fullmatch(
        STAMP + r"login: bug_find attempt 1 worker_error \(worker exited 1; agent reported an "
        r"error: Not logged in · Please run /login\) -> bug_find",
        line,
    ), line
    explained = project.run("explain", "login").stdout
    assert "agent reported an error: Not logged in · Please run /login" in explained
    assert "(success)" not in explained and "(success)" not in line


def test_idle_ticks_keep_a_last_tick_figure_for_metrics_doctor_and_the_board(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "crontab").write_text(FAKE_CRONTAB)
    (bin_dir / "crontab").chmod(0o755)
    agents_on_path(bin_dir)  # or `--install` refuses the line (`cron` checks its PATH)
    folder = tmp_path / "proj"
    folder.mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_CRONTAB_FILE": str(tmp_path / "c")}
    assert invoke(["init"], folder).exit_code == 0
    no_cron = invoke(["doctor"], folder, **env).stdout
    assert not re.search(r"^\w+ +ticks ", no_cron, re.M)  # no cron, no tick: nothing to say

    assert invoke(["cron", "--install"], folder, **env).exit_code == 0
    doctor = invoke(["doctor"], folder, **env).stdout
    assert re.search(r"warn  ticks +cron ticks every 1 min, but no tick yet on this host", doctor)

    before = time.time()
    idle = invoke(["tick", "--quiet"], folder, **env)
    assert (idle.exit_code, idle.stdout) == (0, "")  # the log stays quiet ...
    doctor = invoke(["doctor"], folder, **env).stdout
    assert re.search(r"ok    ticks +cron ticks every 1 min; last tick \d+ s ago", doctor), doctor
    metrics = invoke(["metrics"], folder).stdout
    after = time.time()
    stamp = re.search(r"^orchestrator_tick_last_timestamp_seconds (\S+)$", metrics, re.M)
    # this tick's own time: within the test's bracket (a second each side for rounding)
    assert stamp is not None and before - 1 <= float(stamp.group(1)) <= after + 1

    # Three intervals without a tick: doctor says cron may be dead.
    with sqlite3.connect(folder / "orchestrator.db") as db:
        [(value,)] = db.execute("SELECT finished_at FROM ticks").fetchall()
        old = "2020-01-01" + str(value)[10:]
        db.execute("UPDATE ticks SET started_at = ?, finished_at = ?", (old, old))
    db.close()
    doctor = invoke(["doctor"], folder, **env).stdout
    assert re.search(r"warn  ticks +cron ticks every 1 min, but last tick \d+ d ago", doctor)
    assert "orchestrator.log" in doctor


def test_doctor_reads_back_the_interval_of_every_schedule_cron_writes() -> None:
    from orchestrator.scaffold.cron import cron_schedule, schedule_seconds

    for every in (1, 2, 5, 15, 30, 59, 60, 120, 180, 360, 720, 1440):
        assert schedule_seconds(cron_schedule(every)) == every * 60, every
    for hand_made in ("5 * * * *", "*/0 * * * *", "* * * * 1", "0 9-17 * * *", "@hourly"):
        assert schedule_seconds(hand_made) is None, hand_made

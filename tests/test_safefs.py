"""The one helper every workspace and state-folder file goes through."""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import safefs


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _in_time(call: Callable[[], object], seconds: float = 10.0) -> BaseException | None:
    """Run `call` in a thread; fail if it blocks (as a FIFO open would)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked"
    return errors[0] if errors else None


def test_reads_refuse_fifos_devices_links_and_folders(tmp_path: Path, fifo: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    real = tmp_path / "real.txt"
    real.write_text("inside")
    (tmp_path / "link").symlink_to(real)
    for name in ("pipe", "zero", "link"):
        path = tmp_path / name
        for read in (safefs.read_bytes, safefs.read_tail):
            error = _in_time(functools.partial(read, path, 100))
            assert isinstance(error, OSError), (name, read, error)
    assert isinstance(_in_time(lambda: safefs.read_bytes(tmp_path, 10)), OSError)
    assert safefs.read_bytes(real, 100) == b"inside"
    assert safefs.read_tail(real, 3) == b"ide"


def test_one_budget_caps_the_total_across_files(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 1000)
    budget = safefs.Budget(2500)
    got = [len(safefs.read_bytes(tmp_path / f"f{i}", 1000, budget)) for i in range(5)]
    assert got == [1000, 1000, 500, 0, 0]
    assert budget.spent == 2500
    digests = safefs.Budget(1500)
    first, _ = safefs.digest(tmp_path / "f0", 10_000, digests)
    stood_in, size = safefs.digest(tmp_path / "f1", 10_000, digests)  # 1000 > 500 left
    assert digests.spent == 1000 and size == 1000
    assert first != stood_in  # same content, but the second is hashed by metadata


def test_digest_hashes_a_link_by_its_target_name(tmp_path: Path, fifo: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    budget = safefs.Budget(1 << 20)
    linked, size = safefs.digest(tmp_path / "zero", 1 << 20, budget)
    special, _ = safefs.digest(fifo, 1 << 20, budget)
    assert size == len("/dev/zero") and special.startswith("special:")
    assert budget.spent == 0 and linked != special


def test_writes_replace_a_planted_link_or_hard_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    folder = tmp_path / "attempt"
    folder.mkdir()
    (folder / "worker.out").symlink_to(victim)
    os.link(victim, folder / "result.json")
    safefs.replace(folder / "worker.out", b"capture")
    with pytest.raises(OSError):
        safefs.write_into(folder / "result.json", b"kept")
    with pytest.raises(FileExistsError):
        safefs.write_new(folder / "result.json", b"kept")
    assert victim.read_text() == "precious"
    assert not (folder / "worker.out").is_symlink()
    assert (folder / "worker.out").read_bytes() == b"capture"
    assert sorted(p.name for p in folder.iterdir()) == ["result.json", "worker.out"]


def test_fresh_folder_refuses_an_existing_one(tmp_path: Path) -> None:
    target = tmp_path / "state" / "t1" / "work-001"
    safefs.fresh_folder(target)
    assert target.is_dir()
    with pytest.raises(safefs.FolderExists):
        safefs.fresh_folder(target)
    (tmp_path / "state" / "t1" / "work-002").symlink_to(tmp_path)
    with pytest.raises(safefs.FolderExists):
        safefs.fresh_folder(tmp_path / "state" / "t1" / "work-002")


# Modules whose every file is in a workspace or a state folder: none of them
# may open one but through safefs (a later edit would reopen items 3-7, 11).
WORKER_REACHABLE = (
    "workspace/fingerprint.py",
    "workspace/changes.py",
    "workspace/git.py",
    "workspace/listing.py",
    "workspace/worktree.py",
    "views/branch.py",
    "views/gate.py",
    "agents/runtime.py",
    "agents/context_file.py",
    "tick/kept.py",
    "tick/steps.py",
)


def test_no_plain_file_calls_where_a_worker_can_reach() -> None:
    package = Path(safefs.__file__).parent
    plain = re.compile(
        r"(?<!safefs)\.(read_text|read_bytes|write_text|write_bytes|open)\(|(?<![\w.])open\("
    )
    offenders = [
        f"{name}: {match.group(0)}"
        for name in WORKER_REACHABLE
        for match in plain.finditer((package / name).read_text())
    ]
    assert offenders == []
    assert plain.search("path.read_text()") and plain.search("os.open(p)")
    assert not plain.search("safefs.read_bytes(p, 1)")


def test_a_folder_swapped_for_a_link_is_not_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "worker.out").write_text("outside")
    (tmp_path / "state").mkdir()
    attempt = tmp_path / "state" / "work-001"
    attempt.symlink_to(outside)
    with pytest.raises(OSError):
        safefs.read_tail(attempt / "worker.out", 100)
    with pytest.raises(OSError):
        safefs.replace(attempt / "worker.out", b"capture")
    assert sorted(p.name for p in outside.iterdir()) == ["worker.out"]
    assert (outside / "worker.out").read_text() == "outside"


def test_fresh_folder_refuses_a_linked_parent(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "t1").symlink_to(outside)
    with pytest.raises(safefs.NotRegularFile):
        safefs.fresh_folder(tmp_path / "state" / "t1" / "work-001")
    assert list(outside.iterdir()) == []

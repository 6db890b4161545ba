"""Adversarial review (revA): `sandbox.visible` replays `--remount-ro` of a
hidden folder as if it showed the host's path, so every program in the
project's folders (config folder, workspace_root, state_root, repository)
is "visible": the tick's and doctor's unseen-program check never fires for
them and each attempt is charged `bwrap: execvp ...: No such file`."""

from __future__ import annotations

from pathlib import Path

from orchestrator.features.sandbox import bwrap as sandbox


def test_a_file_in_a_hidden_folder_is_not_visible(tmp_path: Path) -> None:
    project = Path("/var/tmp") / tmp_path.name  # not under the private /tmp
    (project / "bin").mkdir(parents=True, exist_ok=True)
    program = project / "bin" / "interp"
    program.write_text("")
    work = Path("/var/tmp") / (tmp_path.name + "-ws")
    work.mkdir(exist_ok=True)
    try:
        walls = sandbox.Walls(writable=(work,), hidden=(project,))
        argv = sandbox.wrap(["true"], walls, cwd=work, env={}, base_dir=project)
        assert "--remount-ro" in argv
        assert not sandbox.visible(program, walls, env={}, base_dir=project)
    finally:
        program.unlink()
        (project / "bin").rmdir()
        project.rmdir()
        work.rmdir()

"""The bubblewrap argv a sandboxed command runs under.

The system is bound read-only (`--ro-bind / /`), then overlaid: a private
size-limited `/tmp` and `/dev/shm`, the user's home and `/run` (where
the host's sockets live: connect() ignores a read-only mount) hidden
under empty tmpfs, the project's folders (`Walls.hidden`: the config's
folder, workspace_root, state_root, the repository) hidden under empty
read-only tmpfs, then the paths the command needs bound back, parents
before children, the writable ones last: the files its argv names and
the git data of its worktree read-only, the stage's `sandbox_ro`, its
`sandbox_rw`, and the worktree and the attempt's state folder writable;
last the protected files (`Walls.masked`: the config, the env file, a
database) under /dev/null wherever they are. No capability is left to
the command (a root tick's would otherwise keep CAP_SYS_ADMIN).
An allow-list: what is not bound back is not there
(`walls.py` decides the lists; docs/how-to/sandbox.md).

A new pid namespace (`--unshare-all`) hides the tick and every other
process; `--die-with-parent` takes the namespace down when the tick dies,
and the namespace's first process dying kills every process in it, so a
double-forked child cannot outlive its attempt.

No `--new-session`: the runner already starts bubblewrap in a session of
its own with no controlling terminal (so there is no terminal to inject
into), and the command must stay in bubblewrap's process group for the
runner's group stop (SIGTERM, then SIGKILL) to reach it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BWRAP = "bwrap"
PRIVATE_TMP = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not a file in the host's
SHM = "/dev/shm"  # noqa: S108 - the sandbox's own tmpfs, as /tmp
RUNTIME = (Path("/run"), Path("/var/run"))  # a link to /run on most systems: skipped
RESOLV_CONF = "/etc/resolv.conf"
HIDDEN_BYTES = 1024 * 1024  # an empty hidden folder holds only the mount points bound back


@dataclass(frozen=True)
class Walls:
    """What one sandboxed command may see: plain paths, already expanded."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    ro: tuple[str, ...] = ()  # the stage's sandbox_ro, as written
    rw: tuple[str, ...] = ()  # the stage's sandbox_rw, as written
    network: bool = True
    tmp_mb: int = 1024
    # Folders shown empty and read-only, what is bound back under them aside.
    hidden: tuple[Path, ...] = ()
    # Single files shown as /dev/null (their folder is not the project's).
    masked: tuple[Path, ...] = ()


def bwrap_program() -> str | None:
    """The bubblewrap binary on PATH, or None when it is not installed."""
    return shutil.which(BWRAP)


def expand(path: str, home: str, base_dir: Path) -> Path:
    """`~` is the command's home, a relative path the config's folder."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    found = Path(path)
    return found if found.is_absolute() else base_dir / found


def homes(env: Mapping[str, str]) -> list[Path]:
    """The homes to hide: the one the command is told ($HOME) and the
    account's own, when they differ (a tick run with another HOME)."""
    found: list[Path] = []
    for candidate in (env.get("HOME", ""), _account_home()):
        if candidate and Path(candidate).is_absolute():
            real = Path(os.path.realpath(candidate))
            if real != Path("/") and real not in found:
                found.append(real)
    return found


def _account_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""


def wrap(
    argv: Sequence[str],
    walls: Walls,
    *,
    cwd: Path,
    env: Mapping[str, str],
    base_dir: Path,
    program: str = BWRAP,
) -> tuple[str, ...]:
    """`argv` run by bubblewrap inside `walls`, in `cwd` (seen at its own path)."""
    home = env.get("HOME", "")
    out: list[str] = [program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    size = str(walls.tmp_mb * 1024 * 1024)
    # `--dev` brings a /dev/shm of half the host's memory: bounded as /tmp.
    out += ["--size", size, "--tmpfs", PRIVATE_TMP, "--size", size, "--tmpfs", SHM]
    hidden = [Path(PRIVATE_TMP)]
    # /run holds the host's sockets (a database's, a session bus): a
    # read-only mount does not stop connect(), so it is hidden whole.
    for place in [*homes(env), *RUNTIME]:
        if any(_under(place, h) for h in hidden) or not place.is_dir() or place.is_symlink():
            continue  # under /tmp already hidden; a tmpfs needs a folder to sit on
        out += ["--size", size, "--tmpfs", str(place)]
        hidden.append(place)
    binds: list[tuple[str, Path]] = []
    # Name lookups still work where /etc/resolv.conf leads into /run.
    resolver = Path(os.path.realpath(RESOLV_CONF))
    if resolver != Path(RESOLV_CONF) and any(_under(resolver, h) for h in hidden[1:]):
        binds.append(("--ro-bind-try", resolver))
    binds += [("--ro-bind-try", path) for path in walls.readable]
    binds += [("--ro-bind-try", expand(path, home, base_dir)) for path in walls.ro]
    binds += [("--bind-try", expand(path, home, base_dir)) for path in walls.rw]
    binds += [("--bind", path) for path in walls.writable]
    ordered = _ordered(binds)
    bound = {path for _, path in ordered}
    covers = _hidden(walls.hidden, bound)
    # One list by depth: a folder hidden inside a bound one (the other
    # worktrees' git folders in the repository's) after it, a path bound
    # back inside a hidden folder after the hiding.
    steps = sorted([*(("--tmpfs", p) for p in covers), *ordered], key=lambda fp: len(fp[1].parts))
    for flag, path in steps:
        if flag == "--tmpfs":
            out += ["--size", str(HIDDEN_BYTES), "--tmpfs", str(path)]
        else:
            out += [flag, str(path), str(path)]
    # Masked wherever they are, last: a `sandbox_ro` folder holding one
    # (`~/.config` with the env file in it) must not bring it back.
    for path in walls.masked:
        real = Path(os.path.realpath(path))
        if real.is_file():
            out += ["--ro-bind", os.devnull, str(real)]
    for path in covers:
        out += ["--remount-ro", str(path)]  # nothing new in a hidden folder
    out += ["--chdir", os.path.realpath(cwd)]
    # No capability inside: a root tick's sandbox would otherwise keep
    # CAP_SYS_ADMIN in its namespace and unmount its own walls.
    out += ["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    if walls.network:
        out.append("--share-net")
    out += ["--", *argv]
    return tuple(out)


def _ordered(binds: Iterable[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Parents before children (a later bind covers an earlier one), each
    path once, the writable kind winning a tie; paths real, as bubblewrap
    follows links in the sandbox's view."""
    rank = {"--ro-bind-try": 0, "--bind-try": 1, "--bind": 2}
    chosen: dict[Path, str] = {}
    for flag, path in binds:
        real = Path(os.path.realpath(path))
        if real == Path("/"):
            continue
        if real not in chosen or rank[flag] > rank[chosen[real]]:
            chosen[real] = flag
    return sorted(((f, p) for p, f in chosen.items()), key=lambda fp: len(fp[1].parts))


def _hidden(wanted: Iterable[Path], bound: set[Path]) -> list[Path]:
    """The folders to hide, real, each once: not one bound back as itself,
    and only folders (a tmpfs needs one to sit on)."""
    found: list[Path] = []
    for path in wanted:
        real = Path(os.path.realpath(path))
        if real == Path("/") or real in found or real in bound or not real.is_dir():
            continue
        # One under a tmpfs (a home) is hidden too: a `sandbox_ro` of a
        # folder above it (`~/.config`) would bring it back otherwise.
        found.append(real)
    return found


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


# bubblewrap's options as `wrap` may write them, by how many paths or
# values follow each; what a mount option does to the paths under it.
_ARGS = {
    "--size": 1,
    "--chdir": 1,
    "--cap-drop": 1,
    "--uid": 1,
    "--gid": 1,
    "--hostname": 1,
    "--perms": 1,
    "--remount-ro": 1,  # the same contents, read-only: shows nothing new
}
_MAX_LINKS = 40  # as the kernel's own bound on links followed in one lookup
_SHOWS = {"--ro-bind", "--bind", "--ro-bind-try", "--bind-try", "--dev-bind", "--dev-bind-try"}
_COVERS = {"--tmpfs", "--dir", "--mqueue"}
_SYSTEM = {"--dev", "--proc"}
_FLAGS = {"--unshare-all", "--share-net", "--die-with-parent", "--new-session", "--as-pid-1"}


def visible(path: Path, walls: Walls, *, env: Mapping[str, str], base_dir: Path) -> bool:
    """Whether `path` of the host is there, at its own path, for a command
    run inside `walls`. Answered by replaying the mounts `wrap` itself
    writes, in order (a later mount covers an earlier one), so it follows
    whatever `wrap` hides or binds back; an option it does not know makes
    it answer True (it cannot tell, so it does not accuse). Links are
    followed as bubblewrap follows them."""
    argv = wrap(["true"], walls, cwd=Path("/"), env=env, base_dir=base_dir)
    words = list(argv[1 : argv.index("--")])
    # Inside, the kernel follows each link where the sandbox shows it: every
    # link on the way must be there as well as what it leads to.
    return all(_replay(step, words) for step in _lookups(path))


def _lookups(path: Path) -> list[Path]:
    """Each place the kernel looks at to resolve `path`: every link on the
    way (at its own place, its folder resolved), then the file itself."""
    seen: list[Path] = []
    here = Path("/")
    todo = list((path if path.is_absolute() else Path.cwd() / path).parts[1:])
    hops = 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            here = here.parent
            continue
        step = here / name
        if step.is_symlink() and hops < _MAX_LINKS:
            hops += 1
            seen.append(step)
            target = step.readlink()
            if target.is_absolute():
                here = Path("/")
            todo = [*target.parts[1 if target.is_absolute() else 0 :], *todo]
            continue
        here = step
    seen.append(here)
    return seen


def _replay(real: Path, words: Sequence[str]) -> bool:
    """Whether `real` (resolved as `_lookups` resolves it) is there after
    the mounts `words` make, in order."""
    source: Path | None = None  # where the path's contents come from; None: hidden
    made = False  # hidden, but bubblewrap made it a folder to mount something under
    index = 0
    while index < len(words):
        option = words[index]
        if option in _SHOWS:
            src, dst = Path(words[index + 1]), Path(words[index + 2])
            if not (option.endswith("-try") and not src.exists()):  # else it binds nothing
                if _under(real, dst):
                    source, made = src / real.relative_to(dst), False
                elif _under(dst, real) and source is None:
                    made = True
            index += 3
        elif option in _COVERS or option in _SYSTEM:
            place = Path(words[index + 1])
            if _under(real, place):  # a tmpfs is an empty folder at its own path
                source, made = (real if option in _SYSTEM else None), real == place
            index += 2
        elif option in _ARGS:
            index += 1 + _ARGS[option]
        elif option in _FLAGS:
            index += 1
        else:
            return True
    return made or (source is not None and (source.exists() or source.is_symlink()))


def unseen_program(
    program: str, walls: Walls, *, env: Mapping[str, str], base_dir: Path
) -> Path | None:
    """The file `program` runs, or its `#!` interpreter, when it is on the
    host but not inside `walls`; None when all of it is seen, or when only
    the attempt can tell (a relative path, a placeholder, a program not on
    the host). A bare name is looked for as the sandbox's execvp looks: the
    first folder of the command's PATH that holds it inside the walls."""
    if "{" in program or ("/" in program and not program.startswith("/")):
        return None
    if program.startswith("/"):
        candidates = [Path(program)]
    else:
        search = env.get("PATH", os.defpath).split(os.pathsep)
        # A relative folder is the sandbox's working folder's: only the attempt knows.
        candidates = [Path(folder) / program for folder in search if folder.startswith("/")]
    found = [path for path in candidates if path.is_file() and os.access(path, os.X_OK)]
    if not found:
        return None
    runs = next((p for p in found if visible(p, walls, env=env, base_dir=base_dir)), None)
    if runs is None:
        return found[0]
    interpreter = _interpreter(runs)
    if interpreter is not None and not visible(interpreter, walls, env=env, base_dir=base_dir):
        return interpreter
    return None


def _interpreter(path: Path) -> Path | None:
    """The absolute `#!` interpreter of a script, if it names one."""
    try:
        with path.open("rb") as file:
            head = file.read(256)
    except OSError:
        return None
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    return Path(os.fsdecode(words[0])) if words and words[0].startswith(b"/") else None


def unseen_reason(program: str, unseen: Path) -> str:
    """What doctor and the tick say of a program the sandbox cannot see."""
    return (
        f"{unseen} is not visible inside the sandbox (its folder is not mounted there; "
        f"bwrap would fail with `execvp {program}: No such file or directory`): move it, "
        f"or bind its folder back with sandbox_ro = [{json.dumps(str(unseen.parent))}]"
    )

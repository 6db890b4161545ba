"""Every file the orchestrator reads or writes in a workspace or a state folder.

Workers run as the tick's own user and know those folders, so whatever sits
at a name there is the worker's choice: a link to a file outside, a FIFO
(whose open or read blocks for ever), `/dev/zero`, a sparse terabyte. Each
read here therefore opens without following a link and without blocking,
refuses anything but a regular file, and takes its bytes from a `Budget`
shared by one operation (a gate look, a fingerprint), so the whole
operation has a cap and not only each file. Each write creates its file
afresh (`O_EXCL`) and renames it into place, so a link or hard link planted
at the name is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 16


class NotRegularFile(OSError):
    """What is at the name is a FIFO, a device, a socket, a folder or a link."""


# What a worker's own hand makes of a write: a link or a FIFO planted, a
# folder moved away or swapped for a file. Not the disk's fault.
_PLANTED_ERRNOS = frozenset({errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EEXIST})


def planted(exc: OSError) -> bool:
    """Whether a failed write in a state folder is the worker's doing (the
    tick goes on) rather than the host's (full, read-only, broken)."""
    return isinstance(exc, NotRegularFile) or exc.errno in _PLANTED_ERRNOS


@dataclass
class Budget:
    """Bytes one operation may still read, across all the files it opens."""

    limit: int
    spent: int = 0

    @property
    def left(self) -> int:
        return max(self.limit - self.spent, 0)

    def allows(self, size: int) -> bool:
        """Whether a file of `size` bytes can still be read whole."""
        return size <= self.left


def unlimited() -> Budget:
    return Budget(1 << 62)


def _real_parent(path: Path) -> None:
    """`O_NOFOLLOW` covers the last name only: a folder swapped for a link
    (an attempt's, by its worker) would lead the open out of it."""
    if path.parent.is_symlink():
        raise NotRegularFile(errno.ELOOP, "its folder is a link", str(path.parent))


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path` if it is a regular file, not a link.

    `O_NONBLOCK` makes the open of a FIFO return at once; `fstat` on the
    descriptor (not an earlier `lstat` of the name) decides, so nothing
    swapped in between is read; then reads block normally again."""
    _real_parent(path)
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, limit: int, budget: Budget | None) -> bytes:
    if budget is not None:
        limit = min(limit, budget.left)
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK * 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if budget is not None:
        budget.spent += len(data)
    return data


def read_bytes(path: Path, limit: int, budget: Budget | None = None) -> bytes:
    """At most `limit` bytes (and what `budget` has left) from the start of
    `path`; OSError (`NotRegularFile` among them) when it cannot be read."""
    fd = open_regular(path)
    try:
        return _read_fd(fd, limit, budget)
    finally:
        os.close(fd)


def read_text(path: Path, limit: int, budget: Budget | None = None) -> str:
    return read_bytes(path, limit, budget).decode("utf-8", "replace")


def read_tail(path: Path, limit: int, budget: Budget | None = None) -> bytes:
    """The last `limit` bytes of `path` (fewer when `budget` has less left)."""
    fd = open_regular(path)
    try:
        want = limit if budget is None else min(limit, budget.left)
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - want), os.SEEK_SET)
        return _read_fd(fd, want, budget)
    finally:
        os.close(fd)


def stand_in(info: os.stat_result) -> str:
    """What stands for a file's content when it is not read (too big, or
    past the operation's budget): any write to the file changes its size,
    mtime or ctime, and ctime cannot be set back from user space."""
    return f"stat:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_dev}:{info.st_ino}"


def digest(path: Path, limit: int, budget: Budget) -> tuple[str, int]:
    """(sha256 hex, size) of what is at `path`, never following it out.

    A link is hashed as its target's name, any other non-regular file by
    its type, and a regular file larger than `limit` or than what `budget`
    has left by its metadata (`stand_in`), without reading it. The budget
    is charged only for what is read."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        target = os.fsencode(path.readlink())
        return hashlib.sha256(b"link:" + target).hexdigest(), len(target)
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode):o}", info.st_size
    if info.st_size > limit or not budget.allows(info.st_size):
        return hashlib.sha256(stand_in(info).encode()).hexdigest(), info.st_size
    fd = open_regular(path)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise NotRegularFile(errno.EAGAIN, "replaced while hashed", str(path))
        sha = hashlib.sha256()
        size = 0
        # Reads at most what the lstat promised: a file grown since is cut there.
        while size < info.st_size and (
            chunk := os.read(fd, min(_CHUNK, info.st_size - size, budget.left))
        ):
            sha.update(chunk)
            size += len(chunk)
        budget.spent += size
        return sha.hexdigest(), size
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> None:
    """Create `path`, which must not exist (not even as a dangling link)."""
    _real_parent(path)
    fd = os.open(path, _NEW_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def replace(path: Path, data: bytes, *, keep_partial: bool = False) -> None:
    """Put `data` at `path` atomically: written to a fresh file beside it,
    then renamed over whatever was there (a planted link is replaced, not
    followed). With `keep_partial` a write that fails part way (a full disk)
    still leaves what fit at `path` before the error goes on."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        write_new(tmp, data)
    except OSError:
        if keep_partial and tmp.exists():
            with contextlib.suppress(OSError):
                tmp.replace(path)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    try:
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_into(path: Path, data: bytes) -> None:
    """Overwrite the start of an existing regular file in place (its blocks
    were reserved earlier), refusing a link, a FIFO or a file with another
    name (a hard link planted from outside): OSError then."""
    _real_parent(path)
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise NotRegularFile(errno.EINVAL, "not a file of its own", str(path))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class FolderExists(FileExistsError):
    """An attempt's folder was there before its attempt began."""


def fresh_folder(path: Path) -> None:
    """Make `path` new: its parents are made as needed (the one it sits in
    may not be a link), the folder itself must not exist. An existing one
    is some other hand's (nothing of ours reuses an attempt's folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.is_symlink():
        raise NotRegularFile(errno.ELOOP, "a link, not a folder", str(path.parent))
    try:
        path.mkdir()
    except FileExistsError:
        raise FolderExists(errno.EEXIST, "already exists", str(path)) from None


def read_from(path: Path, offset: int, limit: int) -> bytes:
    """At most `limit` bytes of `path` from `offset` on (a file that grows:
    the web page's live tail); OSError when it cannot be read."""
    fd = open_regular(path)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        return _read_fd(fd, limit, None)
    finally:
        os.close(fd)

"""One error tree; each class carries the exit status the CLI turns it into.

Exit statuses follow sysexits(3) where one fits. The CLI maps an
`OrchestratorError` to `Error: <message>` on stderr and `exit_code`, in one
place, so a user's mistake never prints a traceback.
"""

from __future__ import annotations

import errno


class OrchestratorError(Exception):
    """Something the orchestrator refused or could not do."""

    exit_code: int = 1


class RefusedError(OrchestratorError):
    """A request that is not allowed: unknown task, illegal transition, bad field."""

    exit_code = 1


class UnknownTaskError(RefusedError):
    """No task has that slug."""


class InvalidSlugError(RefusedError):
    """A slug breaks the slug rule (and could escape the workspace root)."""


class IllegalTransitionError(RefusedError):
    """The state machine has no edge for this event from the task's state."""


class InvalidChoiceError(RefusedError):
    """An option's value is not one the task allows, e.g. `reject --to` naming
    a stage that is not an earlier one of its pipeline. Refused (1), like an
    unknown stage anywhere else; the message lists the values that would do."""


class NoVerdictError(OrchestratorError):
    """`verdict` found no JSON verdict in its input (EX_DATAERR)."""

    exit_code = 65


class DependencyError(OrchestratorError):
    """`add --after` names a task that does not exist, or closes a cycle (EX_DATAERR)."""

    exit_code = 65


class DatabaseBusyError(OrchestratorError):
    """Another writer held the database past the busy timeout (EX_UNAVAILABLE)."""

    exit_code = 69


class TickFailedError(OrchestratorError):
    """A tick went on past errors on some tasks (each already on stderr); its
    status is the first error's own, or EX_SOFTWARE (70) for an unexpected one."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.exit_code = status


class ConnectionLostError(OrchestratorError):
    """The database server ended our session or the link to it broke: a
    restart, a network blip, a session idle in a transaction too long
    (EX_UNAVAILABLE). Nothing it was writing was committed."""

    exit_code = 69


class DatabaseUnreadableError(OrchestratorError):
    """Not a database, corrupt, disk full or an I/O error (EX_IOERR)."""

    exit_code = 74


class DatabaseFullError(OrchestratorError):
    """The disk under the database is full (SQLITE_FULL, ENOSPC): nothing of
    the transaction was written, and freeing space heals it (EX_IOERR)."""

    exit_code = 74


class HostIOError(OrchestratorError):
    """A folder or file of the host's failed: disk full, I/O error (EX_IOERR).

    Not the task's fault: the tick stops claiming rather than spend attempts."""

    exit_code = 74


class LockBusyError(OrchestratorError):
    """Another tick holds this host's tick lock (EX_TEMPFAIL)."""

    exit_code = 75


class PermissionDeniedError(OrchestratorError):
    """Permission denied on the database, lock or workspace (EX_NOPERM)."""

    exit_code = 77


class ConfigError(OrchestratorError):
    """Missing or invalid configuration (EX_CONFIG)."""

    exit_code = 78


class SchemaError(ConfigError):
    """Database missing, empty, behind or ahead of the code (EX_CONFIG)."""


class Interrupted(OrchestratorError):
    """The process was stopped by a signal after cleaning up (128 + signo)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


# OSErrors that mean "this user may not write here": the fix is a permission
# or a mount option, like a read-only database (77). Every other OSError on a
# host's file is its I/O failing: a full disk, no inodes, an I/O error (74).
DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class HostFault(Exception):
    """An OSError making or writing an attempt's folders or files: the host's
    fault (a full disk, a read-only mount, no permission), not the task's.
    Raised by the tick's steps and a feature's alike, so the attempt counts
    toward nothing and the tick stops claiming."""

    def __init__(self, error: OrchestratorError) -> None:
        super().__init__(str(error))
        self.error = error


def host_error(what: str, exc: OSError) -> OrchestratorError:
    """`what: reason` with the exit status of an OSError on a host's file."""
    reason = exc.strerror or str(exc)
    if exc.errno in DENIED_ERRNOS:
        return PermissionDeniedError(f"{what}: {reason}")
    return HostIOError(f"{what}: {reason}")


EXIT_CODES: dict[int, str] = {
    0: "done (also: nothing to do)",
    1: "refused: unknown task, transition not allowed, bad slug or field",
    2: "usage error (bad option or argument)",
    65: "`verdict` found no verdict in its input",
    69: "temporary: database busy past the busy timeout, out of reach, or the connection to it "
    "was lost (a tick retries for reconnect_seconds first)",
    70: "a tick went on past an unexpected error on a task (each error is on stderr)",
    74: "database unreadable (not a database, corrupt), or a disk full or I/O error on the "
    "database, lock, workspace or state folder",
    75: "another tick holds the lock",
    77: "permission denied (or a read-only filesystem) on the database, lock, workspace or "
    "state folder",
    78: "configuration or schema problem",
    130: "interrupted by SIGINT, after stopping children and recording the attempt",
    143: "interrupted by SIGTERM, after stopping children and recording the attempt",
}

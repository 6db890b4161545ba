"""The feature's one error of its own."""

from __future__ import annotations

from orchestrator.errors import OrchestratorError


class UsageError(OrchestratorError):
    """Input no record could answer (a pipeline the config does not name, a
    patience of 0): the command line's mistake, exit 2 as click's own."""

    exit_code = 2

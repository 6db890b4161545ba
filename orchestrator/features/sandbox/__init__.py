"""The sandbox: a command whose stage (or pipeline, for `setup`) says
`sandbox = "bwrap"` runs inside bubblewrap, behind walls that hide the
project and bind back only what the command needs. Its keys (`config.py`),
the walls (`walls.py`), the bubblewrap argv (`bwrap.py`), the hook that
wraps a command (`wrapping.py`, reached by the engine only through
`TickHooks.wrap_command`), `doctor`'s look (`doctor.py`) and `init
--sandbox` (`scaffold.py`).

Registering it costs no import beyond this module: the hook's module is
imported when a Ticker is built, and the walls only when a command that
asks for them starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    from orchestrator.features.sandbox.wrapping import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="sandbox", tick=_tick)

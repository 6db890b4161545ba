"""The program's entry point (`orchestrator` and `python -m orchestrator`).

An idle `tick` is answered here before click or SQLAlchemy is imported
(`orchestrator.tick.idle`); everything else is the command line's.
"""

from __future__ import annotations

import sys


def main() -> None:
    from orchestrator.tick.idle import try_idle_tick

    try:
        status = try_idle_tick(sys.argv[1:])
    except KeyboardInterrupt:  # as the command line says it
        sys.stderr.write("Error: interrupted\n")
        sys.exit(130)
    if status is not None:
        sys.exit(status)
    from orchestrator.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()

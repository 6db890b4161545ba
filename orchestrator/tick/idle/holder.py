"""The tick lock's holder note, as `orchestrator.locking.TickLock` writes it:
an idle tick holds the same lock, so a busy tick can name it too.
"""

# os.path, not pathlib: importing pathlib would cost this path a tenth of its time.
# ruff: noqa: PTH105, PTH108, PTH123

from __future__ import annotations

import os


def write_holder(lock_path: str, host: str) -> str | None:
    """The note a busy tick reads to name whom it waited for (JSON, as
    TickLock writes it; a host name needs no escaping, anything else is
    left to json)."""
    from datetime import UTC, datetime

    since = datetime.now(UTC).isoformat(timespec="seconds")
    if host.replace("-", "").replace(".", "").replace("_", "").isalnum() and host.isascii():
        shown = f'"{host}"'
    else:
        import json

        shown = json.dumps(host)
    note = f'{{"pid": {os.getpid()}, "host": {shown}, "since": "{since}"}}'
    holder = f"{lock_path}.holder"
    tmp = f"{holder}.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(note)
        os.replace(tmp, holder)
    except OSError:
        try:  # noqa: SIM105 - contextlib is one more import on this path
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return note


def remove_holder(lock_path: str, note: str | None) -> None:
    """Take the note away, unless another tick wrote its own meanwhile."""
    if note is None:
        return
    holder = f"{lock_path}.holder"
    try:
        with open(holder, encoding="utf-8") as current:
            if current.read() == note:
                os.unlink(holder)
    except OSError:
        pass

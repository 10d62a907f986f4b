"""Who this process runs as, in the words the ledger records it."""

from __future__ import annotations

import getpass
import socket


def who() -> str:
    """user@host of this process's user: a run's ``triggered_by``, a read's reader."""
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return socket.gethostname()

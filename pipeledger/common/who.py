"""Who this process runs as, in the words the ledger records it.

Read from the environment and ``os.uname()`` as :func:`getpass.getuser` and
:func:`socket.gethostname` read them, without importing either module (or ``socket``'s
C extension): every command that reads the ledger records who read it."""

from __future__ import annotations

import os

_USER_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")  # getpass.getuser's order


def _user() -> str:
    """The login name, as :func:`getpass.getuser` finds it (KeyError or OSError when the
    user has no name)."""
    for variable in _USER_VARIABLES:
        user = os.environ.get(variable)
        if user:
            return user
    import pwd  # only when the environment does not say

    return pwd.getpwuid(os.getuid())[0]


def _host() -> str:
    """The host's name: ``socket.gethostname()``, which is ``uname``'s node name."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # a platform without uname

    return socket.gethostname()


def who() -> str:
    """user@host of this process's user: a run's ``triggered_by``, a read's reader."""
    try:
        return f"{_user()}@{_host()}"
    except (KeyError, OSError):
        return _host()

"""Passwords in URLs and ``password=`` pairs are masked in what pipeledger prints."""

from __future__ import annotations

from pipeledger.common.secrets import redact


def test_redaction() -> None:
    assert redact("postgresql://me:pw@host/db failed") == "postgresql://me:***@host/db failed"
    assert redact("host=x password=hunter2 user=y") == "host=x password=*** user=y"

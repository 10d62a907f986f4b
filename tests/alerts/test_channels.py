"""PagerDuty (Events API v2) and email (SMTP) beside webhooks, each against a receiver on
localhost (a real SMTP server, aiosmtpd), with the documented documents; and one
namespace of channel names."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import timedelta
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from pipeledger import alerts
from pipeledger.config.model import parse_config
from pipeledger.errors import ConfigError
from tests.helpers import Project, orders_pipeline
from tests.webhook import Receiver

SETTLE = timedelta(seconds=120)


class Mailbox:
    """An SMTP server's handler: every message it accepts, or a refusal of the test's."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], Message]] = []
        self.reply = "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.reply.startswith("250"):
            mail = message_from_bytes(envelope.content)
            self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), mail))
        return self.reply


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    box = Mailbox()
    with socket.socket() as probe:  # a free port (the controller checks it by connecting)
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    yield box, port
    controller.stop()


@pytest.fixture
def pagerduty() -> Iterator[Receiver]:
    hook = Receiver()
    hook.answer = 202  # as PagerDuty answers
    hook.start()
    yield hook
    hook.stop()


def configure(project: Project, channels: str) -> None:
    project.configure(
        broken=orders_pipeline(
            source={"kind": "csv", "path": "data/broken*.csv"}, target="analytics.broken"
        ),
        raw=f"\n[alerts]\n{channels}",
    )
    (project.root / "data" / "broken_0.csv").write_text("order_id,qty\n1,2,3,4\n")


def run_id(project: Project) -> str:
    rows = project.query(f"SELECT run_id FROM {project.table('pipeledger.pipeline_runs')}")
    return str(rows[0][0])


def test_a_pagerduty_service_gets_a_trigger_event_deduplicated_by_the_alert_id(
    project: Project, pagerduty: Receiver
) -> None:
    configure(
        project,
        f'[alerts.pagerduty.oncall]\nrouting_key = "R0UTING-KEY-123"\nurl = "{pagerduty.url}"\n',
    )
    assert project.cli("run", "broken")[0] == 1
    alerts.wait_for_watchers(SETTLE)
    (event,) = pagerduty.wait_for(1)
    assert event["routing_key"] == "R0UTING-KEY-123" and event["event_action"] == "trigger"
    assert event["client"] == "pipeledger" and len(event["dedup_key"]) == 36
    payload = event["payload"]
    assert (payload["severity"], payload["class"], payload["component"]) == (
        "error",
        "failed",
        "broken",
    )
    assert payload["source"] == "pipeledger" and "*broken* run failed" in payload["summary"]
    details = payload["custom_details"]
    assert details["run_id"] == run_id(project) and "expected 2 fields" in details["reason"]
    (row,) = json.loads(project.cli("alerts", "--json")[1])
    assert (row["webhook"], row["status"]) == ("oncall", "delivered")
    assert "R0UTING" not in project.cli("alerts")[1]


def test_an_email_channel_sends_one_plain_message_per_alert(
    project: Project, smtp: tuple[Mailbox, int]
) -> None:
    box, port = smtp
    configure(
        project,
        f'[alerts.email.team]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        'from = "pipeledger@example.com"\nto = ["data@example.com", "oncall@example.com"]\n',
    )
    assert project.cli("run", "broken")[0] == 1
    alerts.wait_for_watchers(SETTLE)
    ((sender, recipients, mail),) = box.messages
    assert sender == "pipeledger@example.com"
    assert recipients == ["data@example.com", "oncall@example.com"]
    run = run_id(project)
    assert mail["Subject"] == f"[pipeledger] broken: run failed (run {run[:8]})"
    assert mail["X-Pipeledger-Event"] == "failed"
    assert mail["Message-ID"] == f"<{mail['X-Pipeledger-Alert-Id']}@pipeledger>"
    body = mail.get_payload(decode=True).decode()  # type: ignore[union-attr]
    assert "expected 2 fields, found 4" in body.splitlines()[0]
    assert f"run          {run}" in body and "pipeline     broken" in body
    (row,) = json.loads(project.cli("alerts", "--json")[1])
    assert (row["webhook"], row["status"], row["attempts"]) == ("team", "delivered", 1)


def test_an_smtp_refusal_fails_the_alert_for_good(
    project: Project, smtp: tuple[Mailbox, int]
) -> None:
    box, port = smtp
    box.reply = "554 no thanks"
    configure(
        project,
        f'[alerts.email.team]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        'from = "pipeledger@example.com"\nto = ["data@example.com"]\n',
    )
    assert project.cli("run", "broken")[0] == 1
    alerts.wait_for_watchers(SETTLE)
    (row,) = json.loads(project.cli("alerts", "--json")[1])
    assert (row["status"], row["last_error"]) == ("failed", "SMTP 554 no thanks")


def test_channel_names_are_one_namespace_and_each_channel_is_checked() -> None:
    twice = {
        "webhooks": {"ops": "http://127.0.0.1:9/hook"},
        "pagerduty": {"ops": {"routing_key": "k"}},
    }
    with pytest.raises(ConfigError, match=r"channel names \['ops'\] are used twice"):
        parse_config({"alerts": twice}, Path("p.toml"))
    bad = {"email": {"mail": {"host": "smtp", "from": "not an address", "to": []}}}
    with pytest.raises(ConfigError) as caught:
        parse_config({"alerts": bad}, Path("p.toml"))
    message = str(caught.value)
    assert "alerts.email.mail.from: 'not an address' is not an email address" in message
    assert "alerts.email.mail.to" in message

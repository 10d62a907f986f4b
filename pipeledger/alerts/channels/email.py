"""Email: one plain-text message per alert over SMTP (STARTTLS, SSL or plain, with a login
when ``username`` is given).

::

    From: <from>                    Subject: [pipeledger] orders: run failed (run 5f0c1a2b)
    To: <to, ...>                   Message-ID: <alert_id@pipeledger>
    X-Pipeledger-Event: failed      X-Pipeledger-Alert-Id: <alert_id>

    <reason>

    event        failed
    pipeline     orders
    run          <run_id>
    occurred at  <occurred_at>
    alert id     <alert_id>
    details      <each detail on a line of its own>

A reply code of 5xx (a recipient or the sender refused, a login refused) refuses the alert
for good; 4xx, a lost connection or a timeout is a failed attempt, tried again.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from pipeledger.alerts.channels import Refused
from pipeledger.alerts.events import TITLES
from pipeledger.common.http import cut_off_after
from pipeledger.config.model import EmailChannel


def message(alert: dict[str, Any], config: EmailChannel) -> EmailMessage:
    """The message of one alert (module docstring)."""
    kind, run_id = str(alert.get("event")), alert.get("run_id")
    run = f" (run {str(run_id)[:8]})" if run_id else ""
    mail = EmailMessage()
    mail["Subject"] = f"[pipeledger] {alert.get('pipeline')}: {TITLES.get(kind, kind)}{run}"
    mail["From"] = config.sender
    mail["To"] = ", ".join(config.to)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = f"<{alert.get('alert_id')}@pipeledger>"
    mail["X-Pipeledger-Event"] = kind
    mail["X-Pipeledger-Alert-Id"] = str(alert.get("alert_id"))
    facts = [
        ("event", kind),
        ("pipeline", alert.get("pipeline")),
        ("run", run_id),
        ("occurred at", alert.get("occurred_at")),
        ("alert id", alert.get("alert_id")),
    ]
    lines = [str(alert.get("reason")), ""]
    lines += [f"{name:<12} {value}" for name, value in facts if value is not None]
    details = alert.get("details") or {}
    lines += [
        f"{'details' if i == 0 else '':<12} {k}: {v}" for i, (k, v) in enumerate(details.items())
    ]
    mail.set_content("\n".join(lines) + "\n")
    return mail


def _refusal(exc: smtplib.SMTPException) -> Exception:
    """Refused for a 5xx reply (every recipient refused with one), else the error itself."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        return Refused(f"every recipient refused: {exc.recipients}") if min(codes) >= 500 else exc
    if isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500:
        text = (
            exc.smtp_error.decode(errors="replace")
            if isinstance(exc.smtp_error, bytes)
            else exc.smtp_error
        )
        return Refused(f"SMTP {exc.smtp_code} {text}")
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return Refused(f"the server does not support it: {exc}")
    return exc


class Email:
    def __init__(self, config: EmailChannel) -> None:
        self.config = config

    def send(self, alert: dict[str, Any], timeout: float) -> None:
        config = self.config
        mail = message(alert, config)
        context = ssl.create_default_context()
        smtp = (
            smtplib.SMTP_SSL(timeout=timeout, context=context)
            if config.security == "ssl"
            else smtplib.SMTP(timeout=timeout)
        )
        with cut_off_after(timeout, lambda: getattr(smtp, "sock", None)) as cut:
            try:
                smtp.connect(config.host, config.smtp_port)
                if config.security == "starttls":
                    smtp.starttls(context=context)
                if config.username is not None and config.password is not None:
                    smtp.login(config.username, config.password)
                smtp.send_message(mail)
                smtp.quit()
            except TimeoutError:
                raise TimeoutError(f"no answer within {timeout:g} s") from None
            except (smtplib.SMTPException, OSError) as exc:
                if cut.is_set():
                    raise TimeoutError(f"no answer within {timeout:g} s") from None
                if isinstance(exc, smtplib.SMTPException):
                    raise _refusal(exc) from exc
                raise
            finally:
                smtp.close()

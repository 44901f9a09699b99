"""Telling people when a verdict changes: a notifier for the DAGs' last task (on success and on
failure) that sends every row of the DAG run's runs whose verdict differs from the last run of the
same settings, and every invalid run, through each configured channel (`CHANNELS`): a notifier kind of
Airflow's providers and the connection it sends through. Nothing changed, nothing sent.

The channels are Airflow configuration, `[acklab] notify` (`AIRFLOW__ACKLAB__NOTIFY`): comma-separated
`KIND:CONNECTION_ID`, default `smtp:acklab_smtp,slack:acklab_slack,apprise:acklab_apprise`. A channel whose connection does not
exist is skipped with a log line; one that fails is logged and the others are still told.

- `smtp`: the SMTP provider's notifier, the HTML body, to the connection extra's `to` (unless the
  notifier names recipients);
- `slack`: the Slack provider's incoming-webhook notifier (connection type `slackwebhook`), the
  text body in Slack's mrkdwn;
- `apprise`: the Apprise provider's connection, which names any of Apprise's services (Teams,
  PagerDuty, Opsgenie, Discord, a JSON webhook...): the subject as title, the text body.

Both bodies come from one composition (`compose`) of the same changes; another provider's notifier
is one more entry in `CHANNELS`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseNotifier

if TYPE_CHECKING:
    from acklab.store.history import Change, RunRecord

SMTP_CONN_ID = "acklab_smtp"
SLACK_CONN_ID = "acklab_slack"
APPRISE_CONN_ID = "acklab_apprise"
DEFAULT_CHANNELS = f"smtp:{SMTP_CONN_ID},slack:{SLACK_CONN_ID},apprise:{APPRISE_CONN_ID}"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    subject: str
    html: str  # for mail
    text: str  # for chat (Slack's mrkdwn: *bold*, `code`, <url|label>)


def compose(dag_id: str, dag_run_url: str, runs: list[tuple[RunRecord, list[Change]]]) -> Message | None:
    """The message about `runs` (each with its changed verdicts), or None when none changed and none is invalid."""
    from jinja2 import Environment, PackageLoader, select_autoescape  # not at DAG parse time

    told = [(run, changed) for run, changed in runs if changed or run.status == "invalid"]
    if not told:
        return None
    count = sum(len(changed) for _, changed in told)
    invalid = sum(run.status == "invalid" for run, _ in told)
    said = [f"{count} verdict{'s' * (count != 1)} changed"] if count else []
    said += [f"{invalid} run{'s' * (invalid != 1)} INVALID"] if invalid else []
    versions = sorted({f"Kafka {run.kafka_version}" + (f", client {run.client_version}" if run.client_version else "") for run, _ in told})
    subject = f"acklab {dag_id}: {', '.join(said)} ({'; '.join(versions)})"
    data = {
        "subject": subject, "dag_id": dag_id, "dag_run_url": dag_run_url,
        "runs": [(run, changed, Path(run.report).as_uri() if run.report else None) for run, changed in told],
    }
    html = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape(default=True)).get_template("verdict_changes.html.j2")
    chat = Environment(loader=PackageLoader("acklab"), autoescape=False, keep_trailing_newline=True, finalize=mrkdwn)
    return Message(subject, html.render(**data), chat.get_template("verdict_changes.txt.j2").render(**data).strip() + "\n")


def mrkdwn(value: object) -> str:
    """A value as Slack's mrkdwn text shows it literally: `&`, `<` and `>` escaped (they would start
    an entity, a link or a mention), backticks and asterisks made harmless (code spans, bold)."""
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "'").replace("*", "∗")


def _smtp(message: Message, conn_id: str, to: str | list[str] | None, context: Any) -> str | None:
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    from airflow.sdk import BaseHook

    to = to or BaseHook.get_connection(conn_id).extra_dejson.get("to")
    if not to:
        return None
    SmtpNotifier(to=to, subject=message.subject, html_content=message.html, smtp_conn_id=conn_id).notify(context)
    return str(to)


def _slack(message: Message, conn_id: str, to: str | list[str] | None, context: Any) -> str | None:
    from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

    SlackWebhookNotifier(slack_webhook_conn_id=conn_id, text=message.text).notify(context)
    return f"the Slack webhook of {conn_id}"


def _apprise(message: Message, conn_id: str, to: str | list[str] | None, context: Any) -> str | None:
    """Through the Apprise provider's connection (`apprise`, its extra's `config`: one or more
    `{"path": URL, "tag": ...}`): Teams, PagerDuty, Opsgenie, Discord, Matrix, a JSON webhook... The
    provider's hook ignores whether Apprise delivered; this asks Apprise itself and raises unless
    every service took the message."""
    import apprise
    from airflow.providers.apprise.hooks.apprise import AppriseHook

    hook = AppriseHook(apprise_conn_id=conn_id)
    services = apprise.Apprise()
    hook.set_config_from_conn(conn=hook.get_connection(conn_id), apprise_obj=services)
    if not services.notify(title=message.subject, body=message.text, body_format=apprise.NotifyFormat.TEXT):
        raise RuntimeError(f"Apprise did not deliver to every service of {conn_id}")
    return f"the {len(services)} Apprise service(s) of {conn_id}"


Send = Callable[[Message, str, "str | list[str] | None", Any], "str | None"]
CHANNELS: dict[str, Send] = {"smtp": _smtp, "slack": _slack, "apprise": _apprise}
"""Notifier kind -> how a message goes out through a connection of that kind: who was told, or None
when the connection names nobody."""


def channels(setting: str) -> list[tuple[str, str]]:
    """The `(kind, connection id)` pairs of a `[acklab] notify` value; ValueError naming an unknown kind
    or a malformed entry."""
    found = []
    for entry in filter(None, (part.strip() for part in setting.split(","))):
        kind, _, conn_id = entry.partition(":")
        if kind not in CHANNELS or not conn_id:
            raise ValueError(f"[acklab] notify: {entry!r} is not KIND:CONNECTION_ID with KIND one of {', '.join(CHANNELS)}")
        found.append((kind, conn_id))
    return found


class VerdictChangeNotifier(BaseNotifier):
    """Sends the changed verdicts of the DAG run through every configured channel (see the module);
    a channel without its connection (or, for mail, without recipients) is logged as not told."""

    template_fields = ("to",)

    def __init__(self, to: str | list[str] | None = None, notify_channels: str | None = None) -> None:
        """`to`: mail recipients instead of the SMTP connection's; `notify_channels`: instead of `[acklab] notify`."""
        super().__init__()
        self.to = to
        self.notify_channels = notify_channels

    def notify(self, context: Any) -> None:
        from airflow.providers.common.compat.sdk import conf
        from airflow.sdk.exceptions import AirflowNotFoundException

        from acklab.store.history import changes, runs_of

        dag_run = context["dag_run"]
        base_url = conf.get("api", "base_url", fallback="http://localhost:8080/").rstrip("/")
        runs = runs_of(dag_run.dag_id, dag_run.run_id)
        message = compose(dag_run.dag_id, f"{base_url}/dags/{dag_run.dag_id}/runs/{quote(dag_run.run_id)}", [(run, changes(run.run_id)) for run in runs])
        if message is None:
            log.info("no verdict changed in the %d run(s) of this DAG run: nobody to tell", len(runs))
            return
        setting = self.notify_channels if self.notify_channels is not None else conf.get("acklab", "notify", fallback=DEFAULT_CHANNELS)
        try:
            configured = channels(setting)
        except ValueError as exc:
            log.error("%s; nobody told: %s", message.subject, exc)
            return
        if not configured:
            log.warning("%s; nobody told: [acklab] notify names no channel", message.subject)
            return
        for kind, conn_id in configured:
            try:
                told = CHANNELS[kind](message, conn_id, self.to, context)
            except AirflowNotFoundException:
                log.warning("%s; not told by %s: no connection %s", message.subject, kind, conn_id)
                continue
            except Exception as exc:  # one channel down must not keep the others quiet, nor fail the task
                log.error("%s; telling by %s through %s failed: %s", message.subject, kind, conn_id, exc, exc_info=True)
                continue
            if told is None:
                log.warning("%s; nobody told by %s: connection %s names no recipients (extra 'to')", message.subject, kind, conn_id)
            else:
                log.info("told %s: %s", told, message.subject)

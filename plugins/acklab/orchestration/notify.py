"""Telling people when a verdict changes: a notifier for the DAGs' last task (on success and on
failure) that mails, through the SMTP provider and the Airflow connection `acklab_smtp` (its extra's
`to` names the recipients unless the notifier does), every row of the DAG run's runs whose verdict
differs from the last run of the same settings, and every invalid run. Nothing changed, nothing sent."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseNotifier

if TYPE_CHECKING:
    from acklab.store.history import Change, RunRecord

SMTP_CONN_ID = "acklab_smtp"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    subject: str
    html: str


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
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape(default=True)).get_template("verdict_changes.html.j2")
    html = template.render(
        dag_id=dag_id, dag_run_url=dag_run_url, runs=[(run, changed, Path(run.report).as_uri() if run.report else None) for run, changed in told],
    )
    return Message(subject, html)


class VerdictChangeNotifier(BaseNotifier):
    """Mails the changed verdicts of the DAG run (see the module); without the SMTP connection it
    logs that nobody was told."""

    template_fields = ("smtp_conn_id", "to")

    def __init__(self, smtp_conn_id: str = SMTP_CONN_ID, to: str | list[str] | None = None) -> None:
        super().__init__()
        self.smtp_conn_id = smtp_conn_id
        self.to = to

    def notify(self, context: Any) -> None:
        from airflow.providers.common.compat.sdk import conf
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        from acklab.store.history import changes, runs_of

        dag_run = context["dag_run"]
        base_url = conf.get("api", "base_url", fallback="http://localhost:8080/").rstrip("/")
        runs = runs_of(dag_run.dag_id, dag_run.run_id)
        message = compose(dag_run.dag_id, f"{base_url}/dags/{dag_run.dag_id}/runs/{quote(dag_run.run_id)}", [(run, changes(run.run_id)) for run in runs])
        if message is None:
            log.info("no verdict changed in the %d run(s) of this DAG run: nobody to tell", len(runs))
            return
        try:
            to = self.to or BaseHook.get_connection(self.smtp_conn_id).extra_dejson.get("to")
        except AirflowNotFoundException:
            to = None
        if not to:
            log.warning("%s; nobody told: no connection %s with recipients (extra 'to')", message.subject, self.smtp_conn_id)
            return
        SmtpNotifier(to=to, subject=message.subject, html_content=message.html, smtp_conn_id=self.smtp_conn_id).notify(context)
        log.info("told %s: %s", to, message.subject)

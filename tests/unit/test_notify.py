"""The verdict-change notifier: what it says (pure), and that it mails through the SMTP provider and
an Airflow connection to a real SMTP server (aiosmtpd) only when a verdict changed or a run is invalid."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from acklab.orchestration.notify import VerdictChangeNotifier, compose
from acklab.store.history import Change, RunRecord, record_run

DAG = "kafka_delivery_matrix"


def run(run_id: str, status: str = "fail", **more: object) -> RunRecord:
    return RunRecord(run_id, 2.0, status, "three-brokers", "4.3.1", "2.16.1", DAG, "manual__1", f"/runs/{run_id}/report/index.html", **more)


def test_nothing_changed_and_nothing_invalid_says_nothing() -> None:
    assert compose(DAG, "http://x", [(run("r1", "pass"), [])]) is None


def test_the_message_names_the_changed_rows_their_versions_and_links() -> None:
    message = compose(DAG, "http://airflow/dags/m/runs/1", [(run("r2"), [Change("idempotent__leader-kill", "pass", "fail", "r1")])])
    assert message is not None
    assert message.subject == f"acklab {DAG}: 1 verdict changed (Kafka 4.3.1, client 2.16.1)"
    for said in ("idempotent__leader-kill", "<td>pass</td>", "<b>fail</b>", "r1", "file:///runs/r2/report/index.html", "http://airflow/dags/m/runs/1"):
        assert said in message.html


def test_an_invalid_run_is_told_even_without_changes() -> None:
    message = compose(DAG, "http://x", [(run("r3", "invalid"), []), (run("r4", "pass"), [])])
    assert message is not None and message.subject.startswith(f"acklab {DAG}: 1 run INVALID")
    assert "negative control was not caught" in message.html and "r4" not in message.html


def seed(db: Path) -> None:
    rows = [{"scenario": "idempotent__leader-kill", "profile": "idempotent", "fault": "leader-kill", "guarantee": "exactly-once"}]
    record_run(RunRecord("r1", 1.0, "pass", "three-brokers", "4.3.1", "2.16.1"), rows, {"idempotent__leader-kill": "pass"}, db)
    record_run(run("r2"), rows, {"idempotent__leader-kill": "fail"}, db)


def context(run_id: str = "manual__1") -> dict:
    return {"dag_run": SimpleNamespace(dag_id=DAG, run_id=run_id)}


def test_a_changed_verdict_reaches_a_real_smtp_server(tmp_path: Path, mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_SMTP", mailbox.connection)
    monkeypatch.delenv("AIRFLOW_CONN_ACKLAB_SLACK", raising=False)  # a developer's own webhook is not told
    seed(tmp_path / "h.sqlite")
    VerdictChangeNotifier().notify(context("manual__2"))  # another DAG run: nothing of it in the history
    assert mailbox.messages == []
    VerdictChangeNotifier().notify(context())
    (message,) = mailbox.messages
    assert mailbox.recipients == [["sre@localhost"]] and message["From"] == "acklab@localhost"
    assert message["Subject"] == f"acklab {DAG}: 1 verdict changed (Kafka 4.3.1, client 2.16.1)"
    assert "idempotent__leader-kill" in mailbox.html() and "<b>fail</b>" in mailbox.html()


def test_without_the_smtp_connection_nobody_is_told_and_the_task_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    monkeypatch.delenv("AIRFLOW_CONN_ACKLAB_SMTP", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_ACKLAB_SLACK", raising=False)
    seed(tmp_path / "h.sqlite")
    VerdictChangeNotifier().notify(context())
    assert "not told by smtp: no connection acklab_smtp" in caplog.text


def test_a_changed_verdict_reaches_a_slack_webhook_and_the_mail_alike(tmp_path: Path, mailbox, webhook, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both default channels, each through its provider's notifier and its connection; one composition."""
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_SMTP", mailbox.connection)
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_SLACK", webhook.connection)
    seed(tmp_path / "h.sqlite")
    VerdictChangeNotifier().notify(context())
    (body,) = webhook.bodies
    assert webhook.paths == ["/services/T0/B0/acklab"]
    assert body["text"].startswith(f"*acklab {DAG}: 1 verdict changed (Kafka 4.3.1, client 2.16.1)*")
    assert "`idempotent__leader-kill`: pass → *fail* (was in run r1)" in body["text"]
    assert len(mailbox.messages) == 1


def test_a_channel_that_fails_leaves_the_others_told(tmp_path: Path, mailbox, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_SMTP", mailbox.connection)
    monkeypatch.setenv("AIRFLOW_CONN_DOWN", '{"conn_type": "slackwebhook", "password": "http://127.0.0.1:9/services/none"}')  # nothing listens
    seed(tmp_path / "h.sqlite")
    VerdictChangeNotifier(notify_channels="slack:down,smtp:acklab_smtp").notify(context())
    assert "telling by slack through down failed" in caplog.text and len(mailbox.messages) == 1


def test_a_malformed_channel_setting_is_named() -> None:
    from acklab.orchestration.notify import channels

    assert channels(" smtp:acklab_smtp , slack:ops ") == [("smtp", "acklab_smtp"), ("slack", "ops")]
    with pytest.raises(ValueError, match=r"'pager:x' is not KIND:CONNECTION_ID with KIND one of smtp, slack"):
        channels("smtp:acklab_smtp,pager:x")


def test_the_chat_text_shows_names_literally_and_an_empty_channel_setting_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile name from a user's file may hold what Slack's mrkdwn reads as a link, an entity or a code span."""
    message = compose(DAG, "http://x", [(run("r2"), [Change("my<&>`prof*__leader-kill", "pass", "fail", "r1")])])
    assert message is not None and "`my&lt;&amp;&gt;'prof∗__leader-kill`" in message.text
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    seed(tmp_path / "h.sqlite")
    VerdictChangeNotifier(notify_channels=" ").notify(context())
    assert "nobody told: [acklab] notify names no channel" in caplog.text


def test_any_apprise_service_is_told_and_a_refused_delivery_is_not_called_told(tmp_path: Path, webhook, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the Apprise provider's connection to Apprise's JSON webhook service (a local receiver
    standing for Teams, PagerDuty...): the subject as title, the changed rows in the body."""
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    port = json.loads(webhook.connection)["password"].split(":")[2].split("/")[0]
    monkeypatch.setenv("AIRFLOW_CONN_OPS", json.dumps({"conn_type": "apprise", "extra": {"config": {"path": f"json://127.0.0.1:{port}/ops"}}}))
    monkeypatch.setenv("AIRFLOW_CONN_NOWHERE", json.dumps({"conn_type": "apprise", "extra": {"config": {"path": "json://127.0.0.1:9/none"}}}))
    seed(tmp_path / "h.sqlite")
    with caplog.at_level("INFO"):
        VerdictChangeNotifier(notify_channels="apprise:ops,apprise:nowhere").notify(context())
    (body,) = webhook.bodies
    assert body["title"] == f"acklab {DAG}: 1 verdict changed (Kafka 4.3.1, client 2.16.1)"
    assert "`idempotent__leader-kill`: pass → *fail* (was in run r1)" in body["message"]
    assert "told the 1 Apprise service(s) of ops" in caplog.text
    assert "telling by apprise through nowhere failed: Apprise did not deliver" in caplog.text

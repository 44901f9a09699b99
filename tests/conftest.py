"""Test-wide isolation (each session gets its own run store, so reapers never see real runs), a crash
record, no silent skips under CI, and a count per family at the end.

- Crash record: while the session runs, `test-artifacts/pytest-crash.txt` names the test in progress
  and receives faulthandler's dump should the interpreter die (e.g. SIGABRT in a C extension); the
  file is removed when the session ends normally, so its presence after pytest exits means the
  session crashed.
- With `CI=true`, a test that skips (no Docker engine, no root for iptables or namespaces, no
  browser, no PostgreSQL...) fails instead, with its reason: a capability CI lacks is a failure,
  never a test that vanished.
- The session ends with how many tests ran, failed and were skipped per family (`FAMILIES`)."""

from __future__ import annotations

import email
import faulthandler
import json
import os
from collections import Counter
from collections.abc import Generator, Iterator
from email.message import Message
from pathlib import Path
from typing import IO, Any

import pytest
from aiosmtpd.controller import Controller

from acklab.base.paths import PROJECT_ROOT
from acklab.cluster.layout import free_ports

CRASH_RECORD = Path(os.environ.get("ACKLAB_TEST_ARTIFACTS", PROJECT_ROOT / "test-artifacts")) / "pytest-crash.txt"
_record: IO[str] | None = None
# A test's family: its first marker among these, else its folder (unit).
FAMILIES = ("scheduler", "browser", "spark_standalone", "compose", "slow", "versions", "killed_runs", "field_notes", "integration")
_outcomes: Counter[tuple[str, str]] = Counter()


def _family(item: pytest.Item) -> str:
    return next((name for name in FAMILIES if item.get_closest_marker(name)), "unit")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CI") == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which must run every test: {reason}"
    if report.when == "call" or report.outcome != "passed":
        _outcomes[(_family(item), report.outcome)] += 1  # once per test: its call, or the setup that stopped it
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    families = sorted({family for family, _ in _outcomes})
    if not families:
        return
    terminalreporter.section("tests per family")
    for family in families:
        ran = _outcomes[(family, "passed")] + _outcomes[(family, "failed")]
        terminalreporter.write_line(
            f"{family:<18} ran {ran:>4}   passed {_outcomes[(family, 'passed')]:>4}   failed {_outcomes[(family, 'failed')]:>4}   "
            f"skipped {_outcomes[(family, 'skipped')]:>4}"
        )


@pytest.fixture(scope="session", autouse=True)
def isolated_run_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    os.environ["ACKLAB_RUNS"] = str(runs)
    return runs


class Mailbox:
    """What a real SMTP server (aiosmtpd, on 127.0.0.1) received; `connection` is the Airflow
    connection (JSON) that sends to it, with `to` as recipients."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.recipients: list[list[str]] = []
        self.connection = ""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"

    def html(self, n: int = 0) -> str:
        return next(part.get_payload(decode=True).decode() for part in self.messages[n].walk() if part.get_content_type() == "text/html")


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox()
    server = Controller(box, hostname="127.0.0.1", port=free_ports(1)[0])
    server.start()
    box.connection = json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": server.port,
        "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "acklab@localhost", "to": "sre@localhost", "retry_limit": 0},
    })
    try:
        yield box
    finally:
        server.stop()


class Webhook:
    """What a local HTTP server on 127.0.0.1 received as a Slack incoming webhook would (one JSON body
    per POST, answered `ok`); `connection` is the Airflow `slackwebhook` connection (JSON) that posts to it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.connection = ""


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    received = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.paths.append(self.path)
            received.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    received.connection = json.dumps({"conn_type": "slackwebhook", "password": f"http://127.0.0.1:{server.server_port}/services/T0/B0/acklab"})
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


def pytest_configure(config: pytest.Config) -> None:
    global _record
    if hasattr(config, "workerinput"):
        return
    CRASH_RECORD.parent.mkdir(parents=True, exist_ok=True)
    _record = CRASH_RECORD.open("a")
    faulthandler.enable(file=_record, all_threads=True)


def pytest_runtest_logstart(nodeid: str) -> None:
    if _record is not None:
        os.ftruncate(_record.fileno(), 0)
        _record.write(f"the session died during {nodeid}\n")
        _record.flush()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _record
    if _record is not None:
        faulthandler.disable()
        _record.close()
        _record = None
        CRASH_RECORD.unlink(missing_ok=True)

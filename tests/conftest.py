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
import secrets
import socket
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import IO, Any

import pytest
from aiosmtpd.controller import Controller

from acklab.base.paths import PROJECT_ROOT
from acklab.cluster.layout import free_ports
from acklab.services import processes

CRASH_RECORD = Path(os.environ.get("ACKLAB_TEST_ARTIFACTS", PROJECT_ROOT / "test-artifacts")) / "pytest-crash.txt"
_record: IO[str] | None = None
# A test's family: its first marker among these, else its folder (unit).
FAMILIES = ("scheduler", "browser", "spark_standalone", "compose", "celery", "s3", "slow", "versions", "killed_runs", "field_notes", "integration")
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


WEED = PROJECT_ROOT / ".cache" / "bin" / "weed"  # built by `make s3-deps`


@dataclass(frozen=True)
class S3Server:
    """A real S3-compatible server on 127.0.0.1: SeaweedFS (master, volume, filer and its S3 gateway)
    with one identity and one bucket. `env` is what an S3 client needs to reach it as that identity,
    in the variables the AWS SDKs read."""

    endpoint: str
    bucket: str
    env: dict[str, str]

    def client(self, secret: str | None = None) -> Any:
        """An s3fs filesystem of its own (no instance cache) as the identity, or with another `secret`."""
        import s3fs

        return s3fs.S3FileSystem(key=self.env["AWS_ACCESS_KEY_ID"], secret=secret or self.env["AWS_SECRET_ACCESS_KEY"],
                                 endpoint_url=self.endpoint, skip_instance_cache=True)

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """This process (and what it starts) reaches the server as its identity."""
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """SeaweedFS started for the session (`make s3-deps` builds it) and stopped exactly: no process
    of its session and no listening socket of it may survive."""
    if not WEED.exists():
        pytest.skip(f"no S3-compatible server: {WEED} is missing (make s3-deps builds it)")
    folder = tmp_path_factory.mktemp("seaweedfs")
    key, secret = "acklab", secrets.token_hex(20)
    config = folder / "s3.json"
    config.write_text(json.dumps({"identities": [
        {"name": "acklab", "credentials": [{"accessKey": key, "secretKey": secret}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
    ]}))
    master, volume, filer, s3, *grpc = free_ports(8)
    (folder / "data").mkdir()
    command = [
        str(WEED), "server", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={grpc[0]}", "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}", f"-volume.port.grpc={grpc[1]}", "-volume.max=16", "-volume.preStopSeconds=0",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={grpc[2]}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={grpc[3]}", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        f"-filer.localSocket={folder / 'filer.sock'}", f"-s3.localSocket={folder / 's3.sock'}",
        "-master.telemetry=false",  # no statistics sent anywhere: nothing leaves 127.0.0.1
    ]
    service = processes.spawn("seaweedfs", command, folder / "weed.log", env={"PATH": os.environ["PATH"], "HOME": str(folder)}, cwd=folder)
    server = S3Server(
        endpoint=f"http://127.0.0.1:{s3}", bucket="acklab-evidence",
        env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{s3}", "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
             "AWS_DEFAULT_REGION": "us-east-1"},
    )
    try:
        client = server.client()

        def bucket_made() -> bool:
            try:
                client.mkdir(server.bucket)
                return True
            except OSError:
                return False

        processes.wait_until(bucket_made, "SeaweedFS's S3 gateway to take a bucket", [service], timeout_s=90)
        opened = processes.listening([service])
        assert opened and {address for address, _ in opened} == {"127.0.0.1"}, f"SeaweedFS listens beyond loopback: {opened}"
        yield server
    finally:
        processes.stop([service])
    assert not service.alive() and not processes.session_members(service), f"SeaweedFS outlived its stop:\n{service.log_tail()}"
    for _, port in opened:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"SeaweedFS's port {port} still open"


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

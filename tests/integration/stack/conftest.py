"""The Airflow stack the scheduler and browser tests share: started once for this package and
stopped when its last test is done, so it does not idle under the other integration tests."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from acklab.services import airflow_stack as stack
from acklab.services.airflow_stack import StackState

from ..airflow_rest import AirflowRest


@pytest.fixture(scope="package")
def airflow_stack(acklab_env: dict[str, str], artifacts_dir: Path) -> Iterator[StackState]:
    """The stack as teams deploy it: api-server, scheduler and dag-processor (LocalExecutor) on a
    PostgreSQL started for it, all on 127.0.0.1, with this session's run store and GX project.
    Stopped exactly at the end (its logs kept as artifacts); nothing it started may survive."""
    home = Path(tempfile.mkdtemp(prefix="acklab-stack-"))  # under /tmp: PostgreSQL's user must reach it
    home.chmod(0o755)
    state = stack.start(home, use_postgres=True, base_env=acklab_env)
    try:
        yield state
    finally:
        stack.stop_stack(home)
        shutil.rmtree(artifacts_dir / "airflow-stack", ignore_errors=True)
        shutil.copytree(home / "logs", artifacts_dir / "airflow-stack", dirs_exist_ok=True)
        survivors = [f"{p.name} ({p.pid})" for p in state.all_processes if p.alive()]
        shutil.rmtree(home, ignore_errors=True)
    assert survivors == [], f"stack processes still running: {survivors}"
    port = int(state.url.rsplit(":", 1)[1])
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, f"{state.url} still answers"


@pytest.fixture(scope="package")
def airflow_rest(airflow_stack: StackState) -> AirflowRest:
    return AirflowRest(airflow_stack.url, airflow_stack.user, airflow_stack.password)

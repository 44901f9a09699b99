"""The Airflow stack on CeleryExecutor: a Redis broker from Debian's packages, PostgreSQL, and two
Celery workers of one task slot each, all on 127.0.0.1, started once for this package."""

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

WORKERS = 2
# A killed worker's task is failed 30 s after its last heartbeat; its cluster is orphaned 20 s after
# the share's last sign of life (and reaped by the next provisioning, or by gather).
TIMEOUTS = {"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30", "ACKLAB_HEARTBEAT_S": "20"}


@pytest.fixture(scope="package")
def celery_stack(acklab_env: dict[str, str], artifacts_dir: Path) -> Iterator[StackState]:
    """The stack with CeleryExecutor and two workers; stopped exactly at the end (its logs kept as
    artifacts); nothing it started may survive, its broker's port included."""
    home = Path(tempfile.mkdtemp(prefix="acklab-celery-"))  # under /tmp: PostgreSQL's user must reach it
    home.chmod(0o755)
    env = {k: v for k, v in acklab_env.items() if k != "ACKLAB_BIND_CLUSTER_TO_PID"}
    state = stack.start(home, use_postgres=True, base_env={**env, **TIMEOUTS}, celery_workers=WORKERS)
    try:
        yield state
    finally:
        stack.stop_stack(home)
        shutil.rmtree(artifacts_dir / "celery-stack", ignore_errors=True)
        shutil.copytree(home / "logs", artifacts_dir / "celery-stack", dirs_exist_ok=True)
        survivors = [f"{p.name} ({p.pid})" for p in state.all_processes if p.alive()]
        shutil.rmtree(home, ignore_errors=True)
    assert survivors == [], f"stack processes still running: {survivors}"
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(state.url.rsplit(":", 1)[1]))) != 0, f"{state.url} still answers"


@pytest.fixture(scope="package")
def celery_rest(celery_stack: StackState) -> AirflowRest:
    return AirflowRest(celery_stack.url, celery_stack.user, celery_stack.password)

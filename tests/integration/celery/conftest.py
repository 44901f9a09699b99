"""The Airflow stack on CeleryExecutor: a Redis broker from Debian's packages, PostgreSQL, and two
Celery workers of one task slot each, all on 127.0.0.1, started once for this package."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from acklab.services import airflow_stack as stack
from acklab.services.airflow_stack import StackState

from ..airflow_rest import AirflowRest
from ..helpers import stop_stack_and_check

WORKERS = 2
# A killed worker's task is failed 30 s after its last heartbeat; its cluster is orphaned 20 s after
# the share's last sign of life (and reaped by the next provisioning, or by gather).
TIMEOUTS = {"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30", "ACKLAB_HEARTBEAT_S": "20"}
# The stack runs only the runs a test triggers: unpausing a scheduled DAG (the version DAG, weekly)
# would otherwise also start its latest interval with the default params (the standard matrix on
# every pair), which holds the shares pool and queues the test's run behind it (max_active_runs=1).
TRIGGERED_ONLY = {"AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}


@pytest.fixture(scope="package")
def celery_stack(acklab_env: dict[str, str], artifacts_dir: Path) -> Iterator[StackState]:
    """The stack with CeleryExecutor and two workers, running only the DAG runs the tests trigger
    (no timetable's runs); stopped exactly at the end (its logs kept as artifacts); nothing it
    started may survive, its broker's port included."""
    home = Path(tempfile.mkdtemp(prefix="acklab-celery-"))  # under /tmp: PostgreSQL's user must reach it
    home.chmod(0o755)
    env = {k: v for k, v in acklab_env.items() if k != "ACKLAB_BIND_CLUSTER_TO_PID"}
    state = stack.start(home, use_postgres=True, base_env={**env, **TIMEOUTS, **TRIGGERED_ONLY}, celery_workers=WORKERS)
    try:
        yield state
    finally:
        stop_stack_and_check(home, state, artifacts_dir / "celery-stack")


@pytest.fixture(scope="package")
def celery_rest(celery_stack: StackState) -> AirflowRest:
    return AirflowRest(celery_stack.url, celery_stack.user, celery_stack.password)

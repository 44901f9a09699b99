"""The Airflow stack as teams deploy it: api-server, scheduler and dag-processor as separate
processes (LocalExecutor), on the metadata DB of the Airflow home (SQLite) or on a project-local
PostgreSQL (`acklab.services.postgres`), all on 127.0.0.1. With `celery_workers`, the executor is
CeleryExecutor: a Redis broker (`acklab.services.redis_server`), the results in the PostgreSQL
metadata DB, and that many `airflow celery worker`s of one task slot each (a worker holds one
share's cluster at a time), each its own Celery node.

`start(home)` migrates the DB, creates the DAGs' pool (`acklab.services.airflow_pool`), starts the three components and
returns once the api-server reports the scheduler and the dag-processor healthy; the UI's login is
the user `admin` with a random password (simple auth manager). `stack.json` in the home records
every process (and the PostgreSQL server, if any): `stop(home)` stops exactly those."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx
from pydantic import BaseModel

from acklab.base.paths import PROJECT_ROOT
from acklab.cluster.layout import free_ports
from acklab.services import airflow_pool, postgres, redis_server
from acklab.services.processes import ServiceError, ServiceProcess, listening, spawn, stop, wait_until

STATE_FILE = "stack.json"
USER = "admin"
PASSWORDS_FILE = "simple_auth_manager_passwords.json"
# The scheduler's log server would listen on every interface; its task logs are local files here.
COMPONENTS = {"api-server": [], "scheduler": ["--skip-serve-logs"], "dag-processor": []}
HEALTHY = ("metadatabase", "scheduler", "dag_processor")
# Inherited settings that must not reach the stack: under a scheduler a cluster is held by a lease,
# never bound to the (short-lived) task process that provisioned it.
NOT_INHERITED = ("ACKLAB_BIND_CLUSTER_TO_PID", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CORE__EXECUTOR")


class StackState(BaseModel):
    """A started stack: its URL, login, processes and (optional) PostgreSQL server."""

    url: str
    user: str
    password: str
    database: str  # "sqlite" or "postgresql"
    processes: list[ServiceProcess]
    postgres: ServiceProcess | None = None
    history: str | None = None  # the run history's database (connection acklab_history) when on PostgreSQL
    executor: str = "LocalExecutor"
    redis: ServiceProcess | None = None  # CeleryExecutor's broker
    workers: list[ServiceProcess] = []  # CeleryExecutor's workers (`worker-<k>`)

    @property
    def all_processes(self) -> list[ServiceProcess]:
        return [*self.processes, *self.workers, *([self.redis] if self.redis else []), *([self.postgres] if self.postgres else [])]

    def listening(self) -> set[tuple[str, int]]:
        return listening(self.all_processes)


def load(home: Path) -> StackState | None:
    path = home / STATE_FILE
    return StackState.model_validate_json(path.read_text()) if path.exists() else None


def running(home: Path) -> StackState | None:
    """The stack recorded in `home` if any of its processes still runs."""
    state = load(home)
    return state if state and any(p.alive() for p in state.all_processes) else None


def stack_env(home: Path, port: int, database_url: str | None, base: Mapping[str, str], broker_url: str | None = None) -> dict[str, str]:
    """`base` plus what every component needs: the home, LocalExecutor (CeleryExecutor on `broker_url`,
    its results in the metadata DB), the DB (also the run history's, as the connection `acklab_history`),
    the project's DAGs, the api-server's URL for task workers, a shared JWT secret, the login and local Spark."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in base.items() if k not in NOT_INHERITED}
    env.update({
        "PATH": f"{venv_bin}{os.pathsep}{base.get('PATH', '/usr/bin:/bin')}",  # spark-submit runs `python3`
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / PASSWORDS_FILE),
        "AIRFLOW_CONN_SPARK_DEFAULT": base.get("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"local[*]"}'),
        "SPARK_LOCAL_IP": "127.0.0.1",
    })
    env.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(48))  # 64 bytes: HS512
    if broker_url:  # `start` has checked that the metadata DB is PostgreSQL
        env.update({
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": broker_url,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + database_url,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
            # a killed worker's task is failed after this long without its heartbeat (default 300 s)
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": base.get("AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT", "60"),
        })
    if database_url:  # the run history (acklab.store.history) in the same database, in tables of its own
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = database_url
        env["AIRFLOW_CONN_ACKLAB_HISTORY"] = database_url.replace("+psycopg2://", "://", 1)
    return env


def _airflow(env: Mapping[str, str], *args: str) -> None:
    airflow = str(Path(sys.executable).parent / "airflow")
    result = subprocess.run([airflow, *args], env=dict(env), capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise ServiceError(f"airflow {' '.join(args)} failed: {(result.stdout + result.stderr)[-2000:]}")


def _password(home: Path) -> str:
    """The admin's password: kept across restarts of the same home, random the first time."""
    path = home / PASSWORDS_FILE
    passwords = json.loads(path.read_text()) if path.exists() else {}
    if USER not in passwords:
        passwords[USER] = secrets.token_urlsafe(12)
        path.write_text(json.dumps(passwords))
        path.chmod(0o600)
    return passwords[USER]


def _save(home: Path, state: StackState) -> None:
    """Write `stack.json`, readable by its owner only (it holds the login)."""
    path = home / STATE_FILE
    path.touch(mode=0o600)
    path.write_text(state.model_dump_json(indent=2))


def _healthy(url: str) -> bool:
    try:
        health = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return all((health.get(part) or {}).get("status") == "healthy" for part in HEALTHY)


def start(
    home: Path, port: int | None = None, use_postgres: bool = False, base_env: Mapping[str, str] | None = None,
    timeout_s: float = 180.0, celery_workers: int = 0,
) -> StackState:
    """Start the stack in `home` (on PostgreSQL in `home/postgres` if `use_postgres`; CeleryExecutor
    with `celery_workers` workers and a Redis broker in `home/redis` if any, which needs PostgreSQL);
    stop whatever it started if it does not come up."""
    if running(home):
        raise ServiceError(f"a stack already runs from {home} (stop it first)")
    home.mkdir(parents=True, exist_ok=True)
    (home / "plugins").mkdir(exist_ok=True)
    if celery_workers and not use_postgres:
        raise ServiceError("CeleryExecutor needs the PostgreSQL metadata DB (--postgres)")
    port = port or free_ports(1)[0]
    server = postgres.start(home / "postgres") if use_postgres else None
    broker = None
    try:
        broker = redis_server.start(home / "redis") if celery_workers else None
        env = stack_env(home, port, server.url() if server else None, base_env or os.environ, broker.url() if broker else None)
    except BaseException:
        stop([p for p in (server.process if server else None, broker.process if broker else None) if p])
        raise
    url = f"http://127.0.0.1:{port}"
    state = StackState(
        url=url, user=USER, password=_password(home), database="postgresql" if server else "sqlite",
        processes=[], postgres=server.process if server else None, history=env.get("AIRFLOW_CONN_ACKLAB_HISTORY") if server else None,
        executor=env["AIRFLOW__CORE__EXECUTOR"], redis=broker.process if broker else None,
    )
    try:
        _airflow(env, "db", "migrate")
        for command in airflow_pool.set_commands(celery_workers or None):  # without workers: ACKLAB_SHARE_SLOTS, else 1
            _airflow(env, *command)
        for component, args in COMPONENTS.items():
            state.processes.append(spawn(component, [str(Path(sys.executable).parent / "airflow"), component, *args],
                                         home / "logs" / f"{component}.log", env, cwd=home))
            _save(home, state)
        for k in range(1, celery_workers + 1):
            state.workers.append(spawn(f"worker-{k}", [str(Path(sys.executable).parent / "airflow"), *worker_args(k)],
                                       home / "logs" / f"worker-{k}.log", env, cwd=home))
            _save(home, state)
        wait_until(lambda: _healthy(url), f"Airflow healthy at {url}", state.all_processes, timeout_s)
        for worker in state.workers:
            wait_until(lambda w=worker: " ready." in w.log_tail(20_000), f"{worker.name} ready", state.all_processes, timeout_s)
    except BaseException:
        stop(state.all_processes)
        (home / STATE_FILE).unlink(missing_ok=True)
        raise
    return state


def worker_args(number: int) -> list[str]:
    """`airflow` arguments of Celery worker `number`: one task at a time, its own node name, no log
    server (it would listen on every interface; the task logs are files of the home)."""
    return ["celery", "worker", "--concurrency", "1", "--celery-hostname", f"worker-{number}@%h", "--skip-serve-logs", "--without-mingle", "--without-gossip"]


def stop_stack(home: Path) -> StackState | None:
    """Stop exactly the processes recorded in `home` (Airflow first, then its broker, then PostgreSQL)."""
    state = load(home)
    if state is None:
        return None
    stop([*state.processes, *state.workers])
    if state.redis:
        stop([state.redis])
    if state.postgres:
        stop([state.postgres])
    (home / STATE_FILE).unlink(missing_ok=True)
    return state


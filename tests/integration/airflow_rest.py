"""A small client of Airflow 3's REST API (/api/v2) with the simple auth manager's JWT (/auth/token):
what a user or CI job does to trigger, backfill and watch the DAGs of a running stack."""

from __future__ import annotations

import time
from typing import Any

import httpx

FINISHED = {"success", "failed"}


class AirflowRest:
    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        """Log in as `user`, or without credentials where every user is admin (SIMPLE_AUTH_MANAGER_ALL_ADMINS)."""
        if user is None:
            token = httpx.get(f"{url}/auth/token", timeout=30)
        else:
            token = httpx.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
        token.raise_for_status()
        self.client = httpx.Client(
            base_url=f"{url}/api/v2", headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=30
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def wait_for_dag(self, dag_id: str, timeout_s: float = 120) -> dict[str, Any]:
        """The DAG once the dag-processor has parsed it."""
        deadline = time.monotonic() + timeout_s
        while (response := self.client.get(f"/dags/{dag_id}")).status_code == 404 and time.monotonic() < deadline:
            time.sleep(2)
        response.raise_for_status()
        return response.json()

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.client.patch(f"/dags/{dag_id}", json={"is_paused": paused}).raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})

    def backfill(self, dag_id: str, date: str, conf: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(
            "/backfills", json={"dag_id": dag_id, "from_date": date, "to_date": date, "dag_run_conf": conf, "max_active_runs": 1}
        )
        response.raise_for_status()
        return response.json()

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/dags/{dag_id}/dagRuns")["dag_runs"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float) -> dict[str, Any]:
        """The run once it has finished (success or failed)."""
        deadline = time.monotonic() + timeout_s
        while (run := self.get(f"/dags/{dag_id}/dagRuns/{run_id}"))["state"] not in FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} {run_id} still {run['state']} after {timeout_s:.0f}s: {self.task_states(dag_id, run_id)}")
            time.sleep(3)
        return run

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        instances = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {f"{ti['task_id']}[{ti['map_index']}]" if ti["map_index"] >= 0 else ti["task_id"]: ti["state"] for ti in instances}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> str:
        """The task's log as the UI shows it (the api-server reads the workers' log files); a mapped
        instance's by its `map_index`."""
        content = self.get(
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}", full_content=True, map_index=map_index
        )["content"]
        return "\n".join(_line(line) for line in content)

    def failure_report(self, dag_id: str, run_id: str) -> str:
        """Task states and the log ends of failed tasks (each mapped instance's), for an assertion message."""
        states = self.task_states(dag_id, run_id)
        failed = sorted(key for key, state in states.items() if state == "failed")

        def log_end(key: str) -> str:
            task, _, index = key.partition("[")
            return self.task_log(dag_id, run_id, task, map_index=int(index.rstrip("]")) if index else -1)[-3000:]

        return f"{states}\n" + "\n".join(f"--- {key}:\n{log_end(key)}" for key in failed)


def _line(line: object) -> str:
    """A structured log line as the UI shows it: its event, and a failed task's exception (type: message)."""
    if not isinstance(line, dict):
        return str(line)
    errors = "".join(f"\n{e.get('exc_type')}: {e.get('exc_value')}" for e in line.get("error_detail") or () if isinstance(e, dict))
    return str(line.get("event", line)) + errors

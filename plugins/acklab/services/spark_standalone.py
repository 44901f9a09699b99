"""A Spark standalone master and one worker from pyspark's own launcher (`spark-class`), on 127.0.0.1.

`start(folder)` starts both on free ports (the worker's scratch space in `folder/work`) and returns
once the worker has registered; its `master_url` is what the `spark_default` connection, `acklab
audit --master` or `spark-submit --master` take. `SPARK_LOCAL_IP=127.0.0.1` keeps every socket
(RPC, web UIs, executors) on loopback. `stop()` stops exactly the two processes and their children
(executors)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx
from pydantic import BaseModel

from acklab.cluster.layout import free_ports
from acklab.services.processes import ServiceProcess, listening, spawn, stop, wait_until

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "spark.json"


class SparkStandalone(BaseModel):
    """A running master and worker: the URL to submit to, the master's web UI, the processes."""

    master_url: str
    ui_url: str
    processes: list[ServiceProcess]

    def status(self) -> dict:
        """The master's view (workers, applications) from its web UI's JSON."""
        return httpx.get(f"{self.ui_url}/json/", timeout=10).json()

    def listening(self) -> set[tuple[str, int]]:
        return listening(self.processes)

    def stop(self) -> None:
        stop(self.processes)


def spark_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` with this interpreter's bin first on PATH (spark-class locates pyspark with `python3`),
    this interpreter for the executors' Python, and every socket on loopback."""
    base = dict(os.environ if base is None else base)
    venv_bin = str(Path(sys.executable).parent)
    return {**base, "PATH": f"{venv_bin}{os.pathsep}{base.get('PATH', '/usr/bin:/bin')}", "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable}


def start(folder: Path, cores: int = 2, memory: str = "2g", base_env: Mapping[str, str] | None = None, timeout_s: float = 90) -> SparkStandalone:
    """Start a master and a worker (`cores`, `memory`) logging into `folder`; stop both if the worker
    does not register."""
    spark_class = str(Path(sys.executable).parent / "spark-class")
    port, ui_port, worker_ui_port = free_ports(3)
    env = spark_env(base_env)
    master_url = f"spark://127.0.0.1:{port}"
    master = spawn("spark-master", [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)],
                   folder / "master.log", env)
    state = SparkStandalone(master_url=master_url, ui_url=f"http://127.0.0.1:{ui_port}", processes=[master])
    try:
        state.processes.append(spawn(
            "spark-worker",
            [spark_class, WORKER, master_url, "--host", "127.0.0.1", "--webui-port", str(worker_ui_port),
             "--work-dir", str(folder / "work"), "--cores", str(cores), "--memory", memory],
            folder / "worker.log", env,
        ))
        (folder / STATE_FILE).write_text(state.model_dump_json(indent=2))
        wait_until(lambda: _alive_workers(state) == 1, f"a Spark worker registered at {master_url}", state.processes, timeout_s)
    except BaseException:
        state.stop()
        raise
    return state


def _alive_workers(state: SparkStandalone) -> int:
    try:
        return sum(worker.get("state") == "ALIVE" for worker in state.status().get("workers", []))
    except (httpx.HTTPError, ValueError):
        return 0

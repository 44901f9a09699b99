"""A Docker engine for the Docker backend where none is running: Debian's `dockerd`, as root.
`acklab docker engine` starts one unless an engine answers, and prints how to stop it.

Images cannot be pulled on a sandbox without registry access and the default bridge needs
iptables, so the engine runs with vfs storage, no iptables and no default bridge; the backend uses
host networking on 127.0.0.1, which needs neither.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
from docker.errors import DockerException

DOCKERD_ARGS = ["--storage-driver=vfs", "--iptables=false", "--bridge=none"]


class EngineUnavailable(RuntimeError):
    """No engine answers and none can be started here (the reason says why)."""


def answering() -> str | None:
    """None if an engine answers, else why not."""
    try:
        docker.from_env(timeout=10).ping()
    except DockerException as exc:
        return str(exc)
    return None


def start(log: Path, timeout_s: float = 60.0) -> subprocess.Popen[bytes] | None:
    """Start `dockerd` (logging to `log`) unless an engine answers; return the process we started."""
    reason = answering()
    if reason is None:
        return None
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable(f"no Docker engine ({reason}) and no dockerd binary (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise EngineUnavailable(f"no Docker engine ({reason}) and not root, so dockerd cannot be started")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen([dockerd, *DOCKERD_ARGS], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while (reason := answering()) is not None:
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise EngineUnavailable(f"dockerd did not come up ({reason}): {log.read_text(errors='replace')[-800:]}")
        time.sleep(0.5)
    return process


def stop(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM the dockerd we started (it stops its containerd) and wait; SIGKILL if it hangs."""
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)

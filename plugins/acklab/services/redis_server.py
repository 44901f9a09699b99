"""A project-local Redis server (Debian's `redis-server` package): the Celery broker of the Airflow
stack's CeleryExecutor (`acklab.services.airflow_stack`).

`start(folder)` runs `redis-server` on 127.0.0.1 at a free port, protected mode on, no persistence
(the broker's queue lives as long as the stack), its log in `folder/redis.log`; it returns once the
server answers PING."""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from acklab.cluster.layout import free_ports
from acklab.services.processes import ServiceError, ServiceProcess, spawn, stop, wait_until


@dataclass(frozen=True)
class Redis:
    """A running server: its process and port."""

    process: ServiceProcess
    port: int

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start(folder: Path, timeout_s: float = 30.0) -> Redis:
    """Start a server for `folder` (created); stop it again if it does not answer."""
    server = shutil.which("redis-server")
    if server is None:
        raise ServiceError("no redis-server on PATH (Debian's package: make celery-deps)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_ports(1)[0]
    command = [
        server, "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes", "--save", "", "--appendonly", "no",
        "--dir", str(folder), "--daemonize", "no",
    ]
    process = spawn("redis", command, folder / "redis.log", {"PATH": "/usr/bin:/bin"}, cwd=folder)
    try:
        wait_until(lambda: _answers(port), f"Redis answering on 127.0.0.1:{port}", [process], timeout_s)
    except BaseException:
        stop([process])
        raise
    return Redis(process, port)

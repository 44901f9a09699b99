"""One JVM for the Java producers of a process: the driver's host (`dev.acklab.ProducerHost`,
`AcklabProducer host SOCKET`), serving each producer of a load as a `KafkaProducer` of its own with its
own evidence files and exit status, over its own connection to a Unix socket.

A scenario group starts seven Java producers at once; seven JVMs starting together on two cores cost
about two seconds before the group's loads could begin (docs/benchmarks.md). `JavaHost.shared`
(through `acklab.workload.java_client.host`) starts one host per kafka-clients version and owner
process, on first use, and keeps it for the process's life. The producer processes
(`acklab.workload.java_worker`, forked by the fork server) each connect, send `run JOB`, and then speak
the worker protocol through it.

The host runs at the producers' niceness in a session of its own (as each producer's JVM did: a Ctrl-C
reaching the owner's process group is for the owner to decide). Its socket lives in a folder only this
user can enter. Its stdin is held by the owner alone: when the owner exits, or is killed, the host
stops every run still going (their records are still written) and exits; `close` does the same at the
owner's exit and removes the folder."""

from __future__ import annotations

import atexit
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from acklab.workload.worker import PRODUCER_NICENESS

HOST_ENV = "ACKLAB_JAVA_HOST"  # the socket a Java producer process connects to
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0  # a run still going flushes briefly (5 s) once its owner is gone
LOG_SUFFIX = ".java.log"  # a run's own log beside its producer's files (`ProducerHost.LOG_SUFFIX`)


class JavaHostError(RuntimeError):
    """The host JVM did not start."""


class JavaHost:
    """A running host JVM of one kafka-clients version; `shared(version)` gives this process's one."""

    _shared: ClassVar[dict[str, JavaHost]] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, version: str, command: Callable[[Path], list[str]]) -> JavaHost:
        """This process's host of kafka-clients `version`, started on first use (again if it died)
        by `command` (the driver's `host SOCKET` command for a socket path)."""
        with cls._shared_lock:
            current = cls._shared.get(version)
            if current is None or current.owner != os.getpid() or current.process.poll() is not None:
                current = cls._shared[version] = cls(version, command)
            return current

    def __init__(self, version: str, command: Callable[[Path], list[str]]) -> None:
        self.owner = os.getpid()
        self.folder = Path(tempfile.mkdtemp(prefix="acklab-java-host-"))  # 0700
        self.socket = self.folder / "host.sock"
        niceness = max(0, PRODUCER_NICENESS - os.nice(0))
        self.process = subprocess.Popen(
            ["nice", "-n", str(niceness), *command(self.socket)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if line != "listening":
            self.close()
            raise JavaHostError(f"the Java producer host of kafka-clients {version} did not start (said {line!r}); its log is above")
        atexit.register(self.close)

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        """End the owner's side: the host stops what still runs and exits; its folder is removed."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class HostedRun:
    """One producer's run in the host at `path`, as its producer process sees it: the job in
    `job_file` is sent at once; then lines both ways, and last the host's `exit <code>`
    (`returncode`; HOST_GONE if the connection ended without it)."""

    HOST_GONE = -1

    def __init__(self, path: str, job_file: Path) -> None:
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._connection.connect(path)
        self._connection.sendall(f"run {job_file}\n".encode())
        self._pending = b""
        self.returncode: int | None = None

    def readline(self) -> str:
        """The next line from the run, waiting for it ('' at the connection's end)."""
        while b"\n" not in self._pending:
            chunk = self._connection.recv(4096)
            if not chunk:
                line, self._pending = self._pending, b""
                return line.decode()
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode() + "\n"

    def send(self, line: str) -> None:
        """One line to the run (nothing if the host is gone: `poll` says so)."""
        try:
            self._connection.sendall(f"{line}\n".encode())
        except OSError:
            pass

    def poll(self, timeout: float) -> int | None:
        """The run's exit code once the host has sent it, waiting up to `timeout` seconds for news."""
        if self.returncode is None:
            ready, _, _ = select.select([self._connection], [], [], timeout)
            if ready or b"\n" in self._pending:
                line = self.readline()
                if line.startswith("exit "):
                    self.returncode = int(line.split()[1])
                elif not line:
                    self.returncode = self.HOST_GONE
        return self.returncode

    def close(self) -> None:
        """Leave the run: if it is still going, the host stops it as if this process had gone."""
        self._connection.close()

"""Producer processes forked from one pre-imported server instead of each started from scratch.

Starting Python and importing numpy, pyarrow, pydantic and confluent_kafka is most of a producer
process's start, and a scenario group starts seven at once before its loads can begin; forked
children skip it. `ForkServer.shared()` starts `python -m acklab.workload.forkserver` once per
client process. The server imports the workers' modules, then forks one child per `spawn`; the
child runs the main of the worker named (`WORKERS`: the librdkafka worker, or the Java client's,
which starts its JVM from there) on the caller's pipes (stdin, stdout) and log file (stderr),
passed over a Unix socket. The server is single-threaded and holds no Kafka client, so forking it
is safe.

Messages on the socket (SOCK_SEQPACKET, one per datagram): client -> server ``spawn <worker>
[NAME=VALUE...]`` (with the three fds; the child's environment gets the settings) and ``signal <pid>
<signum>``; server -> client ``pid <pid>`` or ``error <text>`` (the reply to
a spawn) and ``exit <pid> <returncode>``. The server signals only children it has not reaped, so never
a recycled pid, and exits when the client's end closes (the client process ended); its children then
see their parent change and stop, writing their evidence as they do when their parent goes away.
"""

from __future__ import annotations

import atexit
import importlib
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, TextIO

from acklab.workload import worker

# The workers a child can run (each module's main()); the server imports them all before it forks.
WORKERS = {"librdkafka": "acklab.workload.worker", "java": "acklab.workload.java_worker"}
SERVER_GONE = -255  # returncode of children whose server died before reporting their exit
SPAWN_TIMEOUT_S = 30.0


class ForkServerError(RuntimeError):
    """The fork server could not start a producer process."""


class ForkedProcess:
    """A child of the fork server, with the part of `subprocess.Popen`'s interface a load uses."""

    def __init__(self, server: ForkServer, pid: int, stdin: TextIO, stdout: TextIO) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._server = server

    @property
    def returncode(self) -> int | None:
        return self._server.returncode(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._server.wait(self.pid, timeout):
            raise subprocess.TimeoutExpired(f"producer process {self.pid}", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def terminate(self) -> None:
        self._server.signal(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        self._server.signal(self.pid, signal.SIGKILL)


class ForkServer:
    """Client of a running fork server; `shared(python)` gives this process's one for an interpreter
    (each producer client version has its own), started on first use."""

    _shared: ClassVar[dict[str, ForkServer]] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, python: str = sys.executable, env: Mapping[str, str] | None = None) -> ForkServer:
        """The server running `python` (with `env`, default this process's environment)."""
        with cls._shared_lock:
            current = cls._shared.get(python)
            if current is None or current.owner != os.getpid() or not current.alive:
                current = cls._shared[python] = cls(python, env)
            return current

    def __init__(self, python: str = sys.executable, env: Mapping[str, str] | None = None) -> None:
        self.owner = os.getpid()
        client, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with server:
            self._process = subprocess.Popen(
                [python, "-m", __name__, str(server.fileno())],
                pass_fds=[server.fileno()],
                stdin=subprocess.DEVNULL,
                env={**(env or os.environ), "OPENBLAS_NUM_THREADS": "1"},  # no BLAS threads in a process that forks
            )
        self._control = client
        self._spawn_lock = threading.Lock()
        self._replies: queue.Queue[str] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._children: set[int] = set()
        self._changed = threading.Condition()
        self._gone = False
        threading.Thread(target=self._read, name="forkserver-reader", daemon=True).start()
        atexit.register(self.close)

    @property
    def pid(self) -> int:
        """The server process's pid (its children are the producer processes)."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        return not self._gone and self._process.poll() is None

    def spawn(self, stderr: Path, worker: str = "librdkafka", env: Mapping[str, str] | None = None) -> ForkedProcess:
        """Fork a producer process of `worker` (a `WORKERS` name, `env` added to its environment)
        reading its job from the returned process's stdin."""
        if worker not in WORKERS or any(" " in f"{k}{v}" or "=" in k for k, v in (env or {}).items()):
            raise ValueError(f"spawn: worker {worker!r} (one of {', '.join(WORKERS)}) with env {env!r} (no spaces)")
        message = " ".join(["spawn", worker, *(f"{k}={v}" for k, v in (env or {}).items())]).encode()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            with stderr.open("w") as err, self._spawn_lock:
                socket.send_fds(self._control, [message], [stdin_r, stdout_w, err.fileno()])
                try:
                    reply = self._replies.get(timeout=SPAWN_TIMEOUT_S)
                except queue.Empty:  # a late reply would answer the next spawn: retire this server
                    self._gone = True
                    self._control.shutdown(socket.SHUT_RDWR)
                    reply = f"error no reply from the fork server in {SPAWN_TIMEOUT_S:.0f}s"
            kind, _, detail = reply.partition(" ")
            if kind != "pid":
                raise ForkServerError(f"fork server: {detail}")
        except BaseException:
            os.close(stdin_w)
            os.close(stdout_r)
            raise
        finally:  # the child's ends: the server passed them on
            os.close(stdin_r)
            os.close(stdout_w)
        return ForkedProcess(self, int(detail), os.fdopen(stdin_w, "w"), os.fdopen(stdout_r, "r"))

    def returncode(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait(self, pid: int, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: pid in self._exits, timeout)

    def signal(self, pid: int, signum: int) -> None:
        if self.returncode(pid) is None and not self._gone:
            try:
                self._control.send(f"signal {pid} {signum}".encode())
            except OSError:  # the server is gone; its children stop by themselves
                pass

    def close(self) -> None:
        """Close the control socket: the server exits (running children stop by themselves)."""
        try:  # shutdown, not just close: the reader thread's recv holds the socket open
            self._control.shutdown(socket.SHUT_RDWR)
        except OSError:  # already shut down
            pass
        self._control.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _read(self) -> None:
        while True:
            try:
                message = self._control.recv(256).decode()
            except OSError:
                message = ""
            if not message:
                break
            kind, _, detail = message.partition(" ")
            if kind == "exit":
                pid, code = (int(x) for x in detail.split())
                with self._changed:
                    self._exits[pid] = code
                    self._changed.notify_all()
                continue
            if kind == "pid":  # in message order: an earlier child's exit under a recycled pid is forgotten
                with self._changed:
                    self._exits.pop(int(detail), None)
                    self._children.add(int(detail))
            self._replies.put(message)
        with self._changed:  # the server is gone: so is any news of its children
            self._gone = True
            for pid in self._children - set(self._exits):
                self._exits[pid] = SERVER_GONE
            self._changed.notify_all()
        self._replies.put("error the fork server exited")


def serve(control: socket.socket) -> None:
    """The server loop: fork on `spawn`, forward `signal`s, report exits; return when the client is gone."""
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([control], [], [], 0.1)
        if readable:
            message, fds, _flags, _address = socket.recv_fds(control, 256, 3)
            if not message:
                return
            command, *args = message.decode().split()
            if command == "spawn":
                try:
                    pid = _fork(control, fds, args[0], dict(arg.split("=", 1) for arg in args[1:]))
                except OSError as exc:
                    control.send(f"error {exc}".encode())
                else:
                    children.add(pid)
                    control.send(f"pid {pid}".encode())
                finally:
                    for fd in fds:
                        os.close(fd)
            elif command == "signal" and int(args[0]) in children:
                os.kill(int(args[0]), int(args[1]))
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            control.send(f"exit {pid} {os.waitstatus_to_exitcode(status)}".encode())


def _fork(control: socket.socket, fds: list[int], name: str, env: dict[str, str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        control.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin, sys.stdout, sys.stderr = (open(n, mode, closefd=False) for n, mode in ((0, "r"), (1, "w"), (2, "w")))  # noqa: SIM115 - the process's own streams
        os.environ.update(env)
        importlib.import_module(WORKERS[name]).main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the client decides
    worker.yield_cpu_to_brokers()  # inherited by every producer process it forks
    worker.preload()
    for module in WORKERS.values():
        importlib.import_module(module)
    with socket.socket(fileno=int(sys.argv[1])) as control:
        serve(control)


if __name__ == "__main__":
    main()

"""Service processes: started in their own session with a log file, identified by pid and start
time, stopped exactly (the process and the children it had), and their listening sockets listed."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import psutil
from pydantic import BaseModel

from acklab.cluster.state import process_create_time, process_matches


class ServiceError(RuntimeError):
    """A service did not come up (the message quotes its log's end) or cannot be started here."""


class ServiceProcess(BaseModel):
    """One process we started: enough to find, check and stop it from another process."""

    name: str
    pid: int
    create_time: float
    log: Path
    stop_signal: int = signal.SIGTERM

    def alive(self) -> bool:
        return process_matches(self.pid, self.create_time)

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def spawn(
    name: str, command: list[str], log: Path, env: Mapping[str, str], cwd: Path | None = None,
    user: str | None = None, stop_signal: signal.Signals = signal.SIGTERM,
) -> ServiceProcess:
    """Start `command` in a new session (it outlives the caller), stdout and stderr to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd,
            start_new_session=True, user=user, group=user,
        )
    return ServiceProcess(name=name, pid=process.pid, create_time=process_create_time(process.pid), log=log, stop_signal=stop_signal)


def session_members(service: ServiceProcess) -> list[psutil.Process]:
    """Every other process still in the session `service` was started in: its descendants, and the
    orphans it left if it died (a SIGKILLed scheduler's executor workers and their tasks). The
    session's id is the service's pid, which Linux does not reuse while the session has members."""
    members = []
    for process in psutil.process_iter():
        try:
            if process.pid != service.pid and os.getsid(process.pid) == service.pid and process_create_time(process.pid) >= service.create_time - 1:
                members.append(process)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return members


def stop(processes: Iterable[ServiceProcess], timeout_s: float = 30.0) -> None:
    """Signal each process that is still ours with its stop signal (the orphans of one that died:
    SIGTERM), wait, then SIGKILL it and every process of its session and every child it had when we
    began (LocalExecutor workers, uvicorn workers, postgres backends)."""
    targets: list[psutil.Process] = []
    for service in processes:
        members = session_members(service)
        if not service.alive():
            for orphan in members:
                try:
                    orphan.terminate()
                except psutil.NoSuchProcess:
                    continue
            targets += members
            continue
        parent = psutil.Process(service.pid)
        family = [parent, *{*parent.children(recursive=True), *members}]
        try:
            os.kill(service.pid, service.stop_signal)
        except ProcessLookupError:
            continue
        targets += family
    _, survivors = psutil.wait_procs(targets, timeout=timeout_s)
    for process in survivors:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(survivors, timeout=10)


def listening(processes: Iterable[ServiceProcess]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the processes and their children listen on."""
    pids = set()
    for service in processes:
        if service.alive():
            parent = psutil.Process(service.pid)
            pids |= {parent.pid, *(child.pid for child in parent.children(recursive=True))}
    return listening_pids(pids)


def listening_pids(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket these pids listen on (IPv4-mapped addresses, as a JVM's
    socket bound to 127.0.0.1 reports, in their IPv4 form)."""
    return {
        (_ipv4(conn.laddr.ip), conn.laddr.port) for conn in psutil.net_connections(kind="tcp")
        if conn.pid in pids and conn.status == psutil.CONN_LISTEN
    }


def _ipv4(address: str) -> str:
    mapped = getattr(ipaddress.ip_address(address), "ipv4_mapped", None)
    return str(mapped) if mapped else address


def wait_until(ready: Callable[[], bool], what: str, processes: Iterable[ServiceProcess], timeout_s: float) -> None:
    """Poll `ready` until it is true; fail (quoting the log of a process that died) on timeout or death."""
    watched = list(processes)
    deadline = time.monotonic() + timeout_s
    while not ready():
        for service in watched:
            if not service.alive():
                raise ServiceError(f"{service.name} exited before {what}; {service.log}:\n{service.log_tail()}")
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {s.log}:\n{s.log_tail(800)}" for s in watched)
            raise ServiceError(f"{what}: not after {timeout_s:.0f}s\n{tails}")
        time.sleep(1.0)

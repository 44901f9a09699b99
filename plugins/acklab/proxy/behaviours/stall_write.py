"""stall_write: the proxy stops reading the target broker's client connections, so what their client
writes fills the socket buffers and its write blocks part-way through a request (TCP back-pressure:
nothing is dropped and no answer is late, the request is not all sent). Each stall of each
connection is logged (`write_stalls`)."""

from __future__ import annotations

import array
import asyncio
import fcntl
import socket
import termios
import time

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, Options, Rule
from acklab.proxy.connection import Connection


class StallOptions(Options):
    """Stalls of `stall_s` separated by `gap_s` of normal reading, until the window ends (`stall_s`
    0: one stall, the whole window). A stalled connection's receive buffer is capped at
    `receive_buffer_bytes` (the kernel may have grown it to megabytes), so that the client's write
    blocks after little more than its own send buffer (`send.buffer.bytes` in the Java client,
    `socket.send.buffer.bytes` in librdkafka). No less than 128 KiB: a loopback segment is 64 KiB,
    and a smaller window makes the connection crawl once it is read again."""

    stall_s: float = Field(0.0, ge=0, description="each stall lasts this long (0: one stall, the whole window)")
    gap_s: float = Field(0.2, gt=0, le=60, description="between two stalls, the connections are read this long")
    receive_buffer_bytes: int = Field(
        1 << 17, ge=1 << 17, le=1 << 22, description="the proxy's socket receive buffer of a stalled connection (restored when the rule ends)"
    )


def unread_bytes(sock: socket.socket) -> int:
    """The bytes waiting in `sock`'s kernel receive queue (FIONREAD)."""
    count = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, count, True)
    return count[0]


class StallWrite(Activation):
    """Pauses reading every client connection of its broker (open ones and those opened in the
    window) for each stall, resumes them in each gap and at the end; logs each connection's stall
    with what it left waiting: the part of the request the proxy had read (`pending_read` of
    `pending_size` bytes, None if its size had not arrived) and the bytes still in the kernel's
    receive queue (`queued`). A stall that ended with request bytes waiting counts `stalled_writes`."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.options: StallOptions = rule.options
        self.paused: dict[Connection, dict] = {}  # connection -> its stall's log entry
        self.buffers: dict[Connection, int] = {}  # connection -> its receive buffer before the rule
        self.log: list[dict] = []
        self.stalling = True
        self.cycle = asyncio.get_running_loop().create_task(self._cycle()) if self.options.stall_s > 0 else None

    def on_connect(self, conn: Connection) -> None:
        sock = conn.client.transport.get_extra_info("socket")
        if sock is not None and conn not in self.buffers:
            self.buffers[conn] = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.options.receive_buffer_bytes)
        if self.stalling:
            self._pause(conn)

    def _pause(self, conn: Connection) -> None:
        transport = conn.client.transport
        if conn in self.paused or transport.is_closing():
            return
        conn.requests.gate.clear()
        transport.pause_reading()
        self.paused[conn] = {"client_port": transport.get_extra_info("peername", ("", 0))[1], "stalled_at": time.time()}
        self.stats["stalls"] += 1

    def _resume_all(self) -> None:
        for conn, entry in list(self.paused.items()):
            size, read = conn.requests.pending()
            sock = conn.client.transport.get_extra_info("socket")
            queued = unread_bytes(sock) if sock is not None and not conn.client.transport.is_closing() else 0
            entry.update(resumed_at=time.time(), pending_size=size, pending_read=read, queued=queued)
            self.log.append(entry)
            if read or queued:
                self.affected += 1
                self.stats["stalled_writes"] += 1
            conn.requests.gate.set()
            if not conn.client.transport.is_closing():
                conn.client.transport.resume_reading()
        self.paused.clear()

    async def _cycle(self) -> None:
        while True:
            await asyncio.sleep(self.options.stall_s)
            self.stalling = False
            self._resume_all()
            await asyncio.sleep(self.options.gap_s)
            self.stalling = True
            for conn in list(self.host.connections):
                self._pause(conn)

    def on_end(self) -> None:
        if self.cycle is not None:
            self.cycle.cancel()
        self.stalling = False
        self._resume_all()
        for conn, size in self.buffers.items():
            sock = conn.client.transport.get_extra_info("socket")
            if sock is not None and not conn.client.transport.is_closing():
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size // 2)  # the kernel reports twice what was set
        self.buffers.clear()

    def evidence(self) -> list[dict]:
        return self.log


BEHAVIOUR = Behaviour("stall_write", StallOptions, ("stalled_writes",), StallWrite, log="write_stalls")

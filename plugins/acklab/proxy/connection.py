"""One client connection through the proxy and its connection to the broker: the order in which
its requests are answered, the requests held back, and the taps a behaviour leaves on it."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from acklab.proxy.codes import PRODUCE


def frame(body: bytes) -> bytes:
    """A Kafka frame: a 4-byte big-endian size, then `body`."""
    return len(body).to_bytes(4, "big") + body


READ_CHUNK = 1 << 16  # bytes asked of the client stream per read


class FrameReader:
    """A client's requests as Kafka frames, read from its stream in chunks: what part of the next
    frame has arrived is known (`pending`), which a stalled stream's evidence reports."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buffer = bytearray()
        self.start = 0  # where the next frame begins in `buffer`
        self.gate = asyncio.Event()  # cleared: the stream is not read (a stalled connection)
        self.gate.set()

    async def next(self) -> tuple[bytes, bytes]:
        """The next frame's 4-byte size and body (IncompleteReadError once the stream has ended)."""
        while True:
            available = len(self.buffer) - self.start
            if available >= 4:
                end = self.start + 4 + int.from_bytes(self.buffer[self.start : self.start + 4], "big")
                if len(self.buffer) >= end:
                    size, body = bytes(self.buffer[self.start : self.start + 4]), bytes(self.buffer[self.start + 4 : end])
                    self.start = end
                    return size, body
            if self.start:
                del self.buffer[: self.start]
                self.start = 0
            await self.gate.wait()
            chunk = await self.reader.read(READ_CHUNK)
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(self.buffer), None)
            self.buffer += chunk

    def pending(self) -> tuple[int | None, int]:
        """(the size of the frame in progress, None while its 4-byte size has not all arrived; the
        bytes of it, size included, read from the stream so far)."""
        available = len(self.buffer) - self.start
        size = int.from_bytes(self.buffer[self.start : self.start + 4], "big") + 4 if available >= 4 else None
        return size, available


class Holder(Protocol):
    """What held a request: it holds the requests that arrive behind it on its connection."""

    def on_queued(self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, due: float) -> None: ...


@dataclass
class Held:
    """A request held back: its frame, when it is due (inf: when the rule ends or a trigger releases
    it), whether the broker will answer it (not a PRODUCE with acks=0), its log entry (the answer is
    added to it) and the activation that held it (it decides how requests queued behind it are held)."""

    frame: bytes
    correlation: int
    api_key: int
    version: int
    due: float
    answered: bool
    log: dict
    owner: Holder


class Tap:
    """What a behaviour leaves on a connection that outlives its rule (a stalled stream, a rewrite
    pending): it sees every request and response of the connection before the active rule does."""

    def on_request(self, api_key: int) -> bool:
        """Whether the request is consumed (never forwarded)."""
        return False

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        """The response body to pass on (None: dropped)."""
        return body


class Connection:
    """One client connection and its connection to the broker.

    `expected` holds, in send order, the answers due on the connection (a request the proxy sent in
    its own name, such as planted-duplicate's copy, is answered to a tap, never to the client): (correlation, api_key,
    api_version, None, 0) for a request the broker will answer, (correlation, PRODUCE, version,
    body, due) for an answer the proxy wrote itself, sent once the broker answered everything
    before it and not before `due` (monotonic time), and (correlation, PRODUCE, version, future, 0)
    for an answer the proxy will have once the future is done (`promise`), sent in its turn then."""

    def __init__(self, upstream: asyncio.StreamWriter, client: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
        """`reader`: the client's stream, read as frames through `requests`."""
        self.upstream, self.client = upstream, client
        self.requests = FrameReader(reader)
        self.expected: deque[tuple[int, int, int, bytes | asyncio.Future[bytes] | None, float]] = deque()
        self.held: deque[Held] = deque()
        self.awaiting: dict[int, dict] = {}  # released requests not answered yet -> their log entry
        self.request_taps: list[Tap] = []
        self.response_taps: list[Tap] = []
        self.client_open = True
        self.wake = asyncio.Event()
        self.released = asyncio.Event()

    def forward(self, frame: bytes, correlation: int, api_key: int, version: int) -> None:
        self.expected.append((correlation, api_key, version, None, 0.0))
        self.upstream.write(frame)

    def answer(self, correlation: int, version: int, body: bytes, delay_s: float = 0.0) -> None:
        """Answer a request in the proxy's name `delay_s` from now, in order behind the answers
        still due from the broker (later answers wait behind it)."""
        if self.expected or delay_s:
            self.expected.append((correlation, PRODUCE, version, body, time.monotonic() + delay_s))
            if delay_s:
                asyncio.get_running_loop().call_later(delay_s, self.flush_answers)
        else:
            self.to_client(frame(body))

    def promise(self, correlation: int, version: int) -> asyncio.Future[bytes]:
        """A place in the order of answers for request `correlation`, answered in the proxy's name
        with the body the returned future is given (as soon as it is its turn and the future is done)."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: self.flush_answers())
        self.expected.append((correlation, PRODUCE, version, future, 0.0))
        return future

    async def answered(self, correlation: int) -> tuple[int, int]:
        """(api_key, api_version) of the request `correlation` answers (-1, -1 if unknown); answers
        of the proxy before it are sent first (once due), requests never answered (acks=0) forgotten."""
        while self.expected:
            expected, api_key, version, body, due = self.expected[0]
            if body is None:
                self.expected.popleft()
                if expected == correlation:
                    return api_key, version
            elif isinstance(body, asyncio.Future):
                await asyncio.wait({body})  # sent by flush_answers once done, or below
                if self.expected and self.expected[0][3] is body:
                    self.expected.popleft()
                    self.to_client(frame(body.result()))
            elif (wait_s := due - time.monotonic()) > 0:
                await asyncio.sleep(wait_s)  # the head may be sent meanwhile (flush_answers): look again
            else:
                self.expected.popleft()
                self.to_client(frame(body))
        return -1, -1

    def flush_answers(self) -> None:
        """Send the proxy's answers at the head of `expected` that are due."""
        while self.expected and (body := self.expected[0][3]) is not None:
            if isinstance(body, asyncio.Future):
                if not body.done():
                    return
                self.expected.popleft()
                self.to_client(frame(body.result()))
            elif self.expected[0][4] <= time.monotonic():
                self.expected.popleft()
                self.to_client(frame(body))
            else:
                return

    def to_client(self, data: bytes) -> None:
        if self.client_open:
            self.client.write(data)

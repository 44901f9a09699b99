"""Client of the proxy's control port (used by the nemesis, from any process)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

from acklab.proxy.rules import ProxyRule


class ProxyControlError(RuntimeError):
    """The proxy refused a command or could not be reached."""


class ProxyControl:
    def __init__(self, port: int, timeout_s: float = 5.0) -> None:
        self.port, self.timeout_s = port, timeout_s

    def _call(self, command: dict) -> dict:
        with socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout_s) as sock:
            sock.sendall(json.dumps(command).encode() + b"\n")
            reply = json.loads(sock.makefile("rb").readline() or b"{}")
        if not reply.get("ok"):
            raise ProxyControlError(f"proxy refused {command['op']}: {reply.get('error', 'no reply')}")
        return reply

    def wait_ready(self, timeout_s: float = 60.0, alive: Callable[[], bool] = lambda: True) -> None:
        """Until the proxy answers a ping; raises after `timeout_s`, or as soon as `alive()` is false."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._call({"op": "ping"})
                return
            except (OSError, ProxyControlError):
                if not alive():
                    raise ProxyControlError(f"proxy exited before its control port {self.port} answered") from None
                if time.monotonic() > deadline:
                    raise ProxyControlError(f"proxy control port {self.port} not answering after {timeout_s:.0f}s") from None
                time.sleep(0.1)

    def set_rule(self, broker: int, rule: ProxyRule) -> None:
        self._call({"op": "set", "broker": broker, "rule": rule.model_dump()})

    def clear(self, broker: int | None = None) -> None:
        self._call({"op": "clear"} if broker is None else {"op": "clear", "broker": broker})

    def withheld(self, broker: int) -> list[dict]:
        """The log of the requests the broker's current or last hold_request rule withheld."""
        return self._call({"op": "withheld", "broker": broker})["withheld"]

    def swallowed(self, broker: int) -> list[dict]:
        """The log of the partitions the broker's current or last plant_loss rule answered in its name."""
        return self._call({"op": "swallowed", "broker": broker})["swallowed"]

    def log(self, broker: int, log: str) -> list[dict]:
        """The per-request log `log` (`acklab.proxy.behaviours.base.Behaviour.log`) of the broker's current or last rule."""
        return self._call({"op": log, "broker": broker})[log]

    def stats(self) -> dict[int, dict[str, int]]:
        return {int(b): s for b, s in self._call({"op": "stats"})["stats"].items()}

"""The brokers' own record of their stalls, read from a cluster folder after a run: the KRaft
controller's slow events (`Exceptionally slow controller event <name>(<id>) took N ms` in a node's
server.log) and each node JVM's GC pauses (its `layout.GC_LOG` files). A controller that stalls past
broker.session.timeout.ms fences brokers whose heartbeats were on time; set side by side, the two
say whether its JVM was paused by GC or its threads were waiting for something else (the CPU)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from acklab.cluster.layout import GC_LOG, SERVER_LOG

SLOW_EVENT = re.compile(r"^\[(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \S+ \[QuorumController id=(?P<node>\d+)\] Exceptionally slow controller event (?P<name>\w+)\S* took (?P<ms>\d+) ms")
GC_PAUSE = re.compile(r"^\[(?P<at>[^\]]+)\].*\] GC\(\d+\) (?P<name>Pause [A-Za-z]+).* (?P<ms>[\d.]+)ms$")


@dataclass(frozen=True)
class Stall:
    """`ms` milliseconds of `name` on node `node`, ending at `end` (epoch seconds)."""

    node: int
    name: str
    end: float
    ms: float

    @property
    def start(self) -> float:
        return self.end - self.ms / 1000


def controller_stalls(cluster_dir: Path) -> list[Stall]:
    """Every slow controller event the nodes logged (their server.log and its rolled files), in time order.
    The logs' local timestamps are read in this machine's time zone, the brokers' own."""
    stalls = []
    for log in sorted(cluster_dir.glob(f"node-*/{SERVER_LOG}*")):
        for line in log.read_text(errors="replace").splitlines():
            if match := SLOW_EVENT.match(line):
                end = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                stalls.append(Stall(int(match["node"]), match["name"], end, float(match["ms"])))
    return sorted(stalls, key=lambda s: s.end)


def gc_pauses(cluster_dir: Path) -> list[Stall]:
    """Every GC pause of every node JVM (the GC logs of all its starts), in time order."""
    pauses = []
    for log in sorted(cluster_dir.glob(f"node-*/{GC_LOG.replace('%p', '*')}*")):
        node = int(log.parent.name.removeprefix("node-"))
        for line in log.read_text(errors="replace").splitlines():
            if match := GC_PAUSE.match(line):
                pauses.append(Stall(node, match["name"], datetime.fromisoformat(match["at"]).timestamp(), float(match["ms"])))
    return sorted(pauses, key=lambda s: s.end)


def paused_during(stall: Stall, pauses: list[Stall]) -> float:
    """Milliseconds of `stall` its node spent in GC pauses."""
    return sum(
        max(0.0, min(stall.end, p.end) - max(stall.start, p.start)) * 1000 for p in pauses if p.node == stall.node
    )


def summary(cluster_dir: Path) -> str:
    """One line: the controller's slow events, the GC pauses, and how much of the former the latter explain."""
    slow, pauses = controller_stalls(cluster_dir), gc_pauses(cluster_dir)
    in_gc = sum(paused_during(s, pauses) for s in slow)
    longest_slow = max((s.ms for s in slow), default=0.0)
    longest_gc = max(pauses, key=lambda p: p.ms, default=None)
    gc_text = f"longest {longest_gc.ms:.0f} ms ({longest_gc.name} on node {longest_gc.node})" if longest_gc else "none logged"
    return (
        f"controller slow events: {len(slow)}, {sum(s.ms for s in slow) / 1000:.1f} s in all, longest {longest_slow:.0f} ms; "
        f"GC pauses: {len(pauses)}, {sum(1 for p in pauses if p.ms >= 500)} of 500 ms or more, {gc_text}; "
        f"of the slow events' time, {in_gc / 1000:.1f} s was their node's GC"
    )

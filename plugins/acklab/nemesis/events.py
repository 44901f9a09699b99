"""What the nemesis did: the fault timeline in the evidence."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field


@dataclass
class FaultEvent:
    """One applied fault with its window and whether it took effect."""

    fault: str
    target: str
    action: str
    started: float = field(default_factory=time.time)
    ended: float | None = None
    effect: str = ""
    effective: bool = False
    effective_at: float | None = None
    effective_after: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    withheld: list[dict] = field(default_factory=list)  # the requests a hold withheld (`acklab.store.runs.WithheldRequest`)
    swallowed: list[dict] = field(default_factory=list)  # what planted-loss swallowed (`acklab.store.runs.SwallowedPartition`)
    duplicated: list[dict] = field(default_factory=list)  # what planted-duplicate sent twice (`acklab.store.runs.PlantedPartition`)
    shifted: list[dict] = field(default_factory=list)  # what planted-offset shifted (`acklab.store.runs.PlantedPartition`)
    misrouted: list[dict] = field(default_factory=list)  # what planted-misroute moved (`acklab.store.runs.PlantedPartition`)
    reordered: list[dict] = field(default_factory=list)  # what planted-reorder swapped (`acklab.store.runs.ReorderedPartition`)
    write_stalls: list[dict] = field(default_factory=list)  # each connection stall-write stalled (`acklab.store.runs.WriteStall`)
    interventions: list[dict] = field(default_factory=list)  # processor faults: each instance hit (`acklab.store.runs.Intervention`)

    def observe(self, effect: str | None, otherwise: str, since: float | None = None) -> None:
        """Record whether the cluster showed the fault's effect: first seen now, begun after `since`
        (when the last look that did not see it began; default: when the fault started)."""
        self.effective = effect is not None
        self.effective_at = time.time() if effect is not None else None
        self.effective_after = (self.started if since is None else since) if effect is not None else None
        self.effect = effect or otherwise


@dataclass
class Window:
    """The time a fault is active: until `end` (monotonic), or until `until` is set (the load
    ended, for a fault that lasts until then); `sleep` returns True once it is over (or aborted)."""

    end: float
    stop: threading.Event
    until: threading.Event | None = None

    def sleep(self, seconds: float) -> bool:
        self.stop.wait(min(seconds, 0.2 if self.until is not None else seconds, max(0.0, self.end - time.monotonic())))
        return self.over

    @property
    def over(self) -> bool:
        return self.stop.is_set() or time.monotonic() >= self.end or (self.until is not None and self.until.is_set())

    def wait_out(self) -> None:
        while not self.sleep(1.0):
            pass


@dataclass
class FaultOutcome:
    timeline: list[FaultEvent] = field(default_factory=list)

    @property
    def effective(self) -> bool:
        return all(event.effective for event in self.timeline)

    @property
    def effect(self) -> str:
        return "; ".join(event.effect for event in self.timeline) or "no fault"

    def timeline_dicts(self) -> list[dict[str, object]]:
        return [asdict(event) for event in self.timeline]

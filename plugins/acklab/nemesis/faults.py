"""Fault schedules and their execution against a running cluster.

A schedule is a list of steps relative to the start of the load. Each applied fault is recorded
with its start/end time and whether it took effect; a fault that did nothing makes the scenario
"ineffective", never green.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel, ConfigDict, Field, field_validator

from acklab.cluster.base import Cluster
from acklab.topology import SpecError

log = logging.getLogger(__name__)


class FaultStep(BaseModel):
    """One fault at `at_s` seconds into the load, lasting `duration_s`."""

    model_config = ConfigDict(extra="forbid")
    fault: str
    at_s: float = Field(3.0, ge=0)
    duration_s: float = Field(5.0, gt=0)
    partition: int = Field(0, ge=0, description="the partition whose leader is the target")

    @field_validator("fault")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; valid: {', '.join(FAULT_NAMES)}")
        return name


@dataclass
class FaultEvent:
    """What the nemesis did, for the fault timeline in the evidence."""

    fault: str
    target: str
    action: str
    started: float
    ended: float | None = None
    effect: str = ""
    effective: bool = False


@dataclass
class Window:
    """The time a fault is active; `sleep` returns True once it is over (or aborted)."""

    end: float
    stop: threading.Event

    def sleep(self, seconds: float) -> bool:
        self.stop.wait(min(seconds, max(0.0, self.end - time.monotonic())))
        return self.stop.is_set() or time.monotonic() >= self.end


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


def _leader_kill(cluster: Cluster, topic: str, step: FaultStep, window: Window) -> FaultEvent:
    """SIGKILL the leader of `step.partition`, confirm a new leader, restart it after the duration."""
    admin = cluster.admin(timeout_s=1.0)
    leader = admin.partition(topic, step.partition).leader
    event = FaultEvent(step.fault, f"leader:{topic}/{step.partition}", "kill", started=time.time())
    if leader < 0:
        event.ended, event.effect = time.time(), f"partition {step.partition} had no leader to kill"
        return event
    event.target = f"broker:{leader} (leader:{topic}/{step.partition})"
    cluster.kill(leader)
    killed_at = time.monotonic()
    admin = cluster.admin(timeout_s=1.0, exclude=[leader])
    try:
        while not event.effective and not window.sleep(0.1):
            new_leader = _leader_or_none(admin, topic, step.partition)
            if new_leader is not None and new_leader not in (-1, leader):
                event.effective = True
                event.effect = f"leader of partition {step.partition} moved {leader} -> {new_leader} in {time.monotonic() - killed_at:.1f}s"
        if not event.effective:
            event.effect = f"broker {leader} killed but no new leader within {step.duration_s:.0f}s"
        while not window.sleep(1.0):
            pass
    finally:
        cluster.start(leader)
        event.ended = time.time()
    return event


def _leader_or_none(admin: object, topic: str, partition: int) -> int | None:
    try:
        return admin.partition(topic, partition).leader  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - metadata unavailable while the cluster reacts
        return None


FaultAction = Callable[[Cluster, str, FaultStep, Window], FaultEvent]
FAULTS: dict[str, FaultAction | None] = {"none": None, "leader-kill": _leader_kill}
FAULT_NAMES = tuple(FAULTS)


def schedule_for(fault: str, at_s: float = 3.0, duration_s: float = 5.0) -> list[FaultStep]:
    """The schedule of a catalog fault name (`none` = empty schedule)."""
    if fault not in FAULTS:
        raise SpecError(f"unknown fault {fault!r}; valid: {', '.join(FAULT_NAMES)}")
    return [] if FAULTS[fault] is None else [FaultStep(fault=fault, at_s=at_s, duration_s=duration_s)]


class Nemesis:
    """Runs a schedule in a background thread, relative to `start()`; `join()` restores and reports."""

    def __init__(self, cluster: Cluster, topic: str, steps: list[FaultStep]) -> None:
        self._cluster, self._topic, self._steps = cluster, topic, steps
        self._outcome = FaultOutcome()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        try:
            for step in sorted(self._steps, key=lambda s: s.at_s):
                if self._stop.wait(max(0.0, self._t0 + step.at_s - time.monotonic())):
                    return
                action = FAULTS[step.fault]
                assert action is not None, "schedules never contain the empty fault"
                event = action(self._cluster, self._topic, step, Window(time.monotonic() + step.duration_s, self._stop))
                log.info("fault %s on %s: %s", event.fault, event.target, event.effect)
                self._outcome.timeline.append(event)
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self._error = exc

    def join(self) -> FaultOutcome:
        """Wait for the schedule to finish (faults are always undone), then return the outcome."""
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"nemesis failed: {self._error}") from self._error
        return self._outcome

    def abort(self) -> FaultOutcome:
        """Cut the schedule short (e.g. the load failed); running faults are still undone."""
        self._stop.set()
        return self.join()

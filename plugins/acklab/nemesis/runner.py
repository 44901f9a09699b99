"""Runs a fault schedule in a background thread, relative to the start of the load.

Steps whose windows overlap in the schedule (`overlapping`) run together, each in a thread of its
own from its `at_s`; a step starts only once every earlier step whose window ended before its
`at_s` is done, its undoing included (a broker restarted, a withheld request's answer read), so
faults the schedule does not overlap never meet. The timeline lists the steps in schedule order."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from acklab.nemesis.actions import ACTIONS, FaultContext
from acklab.nemesis.events import FaultEvent, FaultOutcome, Window
from acklab.nemesis.faults import FAULTS, TO_LOAD_END_CEILING_S
from acklab.nemesis.schedule import FaultStep

log = logging.getLogger(__name__)


class Nemesis:
    """`start()` at load start; `load_ended()` once every producer has finished; `join()` waits for
    every fault to be undone and returns the outcome."""

    def __init__(self, ctx: FaultContext, steps: list[FaultStep]) -> None:
        self._ctx, self._steps = ctx, sorted(steps, key=lambda s: s.at_s)
        self._outcome = FaultOutcome()
        self._stop = threading.Event()
        self._load_ended = threading.Event()
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    @property
    def before_load(self) -> bool:
        """The schedule starts with a step before the load (`FaultStep.before_load`)."""
        return any(step.before_load for step in self._steps)

    def start_before_load(self, timeout_s: float) -> None:
        """Start, and return once the step before the load has shown its effect or given up (the
        timeline says which): the producers may start then. TimeoutError past `timeout_s`."""
        self.start()
        deadline = time.monotonic() + timeout_s
        while not self._ctx.settled.wait(0.2):
            if not self._thread.is_alive():
                self.join()  # raises the nemesis's error, if any
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the fault before the load did not settle within {timeout_s:g} s")

    def _run(self) -> None:
        try:
            for together in overlapping(self._steps):
                events: list[FaultEvent | None] = [None] * len(together)
                threads = [
                    threading.Thread(target=self._step, args=(step, events, n), name=f"nemesis-{step.fault}", daemon=True)
                    for n, step in enumerate(together)
                ]
                try:
                    for n, (step, thread) in enumerate(zip(together, threads, strict=True)):
                        if self._stop.wait(max(0.0, self._t0 + step.at_s - time.monotonic())):
                            break
                        for earlier, other in zip(together[:n], threads[:n], strict=True):
                            if _ends(earlier) <= step.at_s:  # overlapped only through others: wait for its undoing
                                other.join()
                        thread.start()
                finally:
                    for thread in threads:
                        if thread.ident is not None:
                            thread.join()
                    self._outcome.timeline.extend(event for event in events if event is not None)
                if self._stop.is_set() or self._error is not None:
                    return
        except BaseException as exc:
            self._failed(exc)

    def _step(self, step: FaultStep, events: list[FaultEvent | None], n: int) -> None:
        """Apply one step for its window; its event goes to `events[n]`, its error to the nemesis
        (the other steps of the schedule are then cut short, their faults still undone). Only a step
        before the load tells the producers when they may start (`FaultContext.settled`)."""
        try:
            window = (
                Window(time.monotonic() + TO_LOAD_END_CEILING_S, self._stop, self._load_ended)
                if FAULTS[step.fault].to_load_end
                else Window(time.monotonic() + step.duration_s, self._stop)
            )
            ctx = self._ctx if step.before_load else replace(self._ctx, settled=threading.Event())
            event = ACTIONS[step.fault](ctx, step, window)
            log.info("fault %s on %s: %s", event.fault, event.target, event.effect)
            events[n] = event
        except BaseException as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._error = self._error or exc
        self._stop.set()

    def load_ended(self) -> None:
        """Every producer has finished: a fault that lasts until then is undone."""
        self._load_ended.set()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def join(self) -> FaultOutcome:
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"nemesis failed: {self._error}") from self._error
        return self._outcome

    def abort(self) -> FaultOutcome:
        """Cut the schedule short (e.g. the load failed); active faults are still undone."""
        self._stop.set()
        return self.join()


def overlapping(steps: list[FaultStep]) -> list[list[FaultStep]]:
    """`steps` (sorted by `at_s`) in runs that run together: a step joins the run before it when it
    starts before every step of that run has ended (a fault lasting to the load's end never ends).
    Within a run, a step still waits for the earlier ones whose windows ended before it starts."""
    runs: list[list[FaultStep]] = []
    end = -1.0
    for step in steps:
        if runs and step.at_s < end:
            runs[-1].append(step)
        else:
            runs.append([step])
            end = -1.0
        end = max(end, _ends(step))
    return runs


def _ends(step: FaultStep) -> float:
    """When the step's window ends in the schedule (a fault lasting to the load's end: never)."""
    return float("inf") if FAULTS[step.fault].to_load_end else step.end_s

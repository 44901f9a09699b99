"""The nemesis runs a schedule's steps at their times: overlapping steps together, the others one
after another with each one's undoing done first; a broker's proxy holds one step's rule at a time.
Pure logic: the faults' actions are scripted, no cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from acklab.nemesis import runner
from acklab.nemesis.actions import FaultContext, ProxyClaims
from acklab.nemesis.events import FaultEvent, Window
from acklab.nemesis.runner import Nemesis, overlapping
from acklab.nemesis.schedule import FaultStep


def _step(fault: str, at_s: float, duration_s: float) -> FaultStep:
    return FaultStep(fault=fault, at_s=at_s, duration_s=duration_s)


def test_steps_run_together_exactly_where_their_windows_overlap() -> None:
    a, b, c, d = _step("latency", 0.0, 2.0), _step("ack-loss", 1.0, 3.0), _step("request-loss", 3.5, 1.0), _step("latency", 4.5, 1.0)
    assert overlapping([a, b, c, d]) == [[a, b, c], [d]]  # c starts before b ends (4.0); d starts as c ends
    to_end = _step("planted-loss", 1.0, 1.0)  # lasts until the load ends: everything after it overlaps
    assert overlapping([a, to_end, d]) == [[a, to_end, d]]
    assert overlapping([]) == []


class _Script:
    """ACTIONS standing in for the faults: each records when it started and when its undoing ended;
    `undo_s` is how long its undoing takes after the window; `fail` raises instead."""

    def __init__(self, undo_s: float = 0.0, fail: str | None = None) -> None:
        self.undo_s, self.fail = undo_s, fail
        self.started: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, ctx: Any, step: FaultStep, window: Window) -> FaultEvent:
        name = f"{step.fault}@{step.at_s:g}"
        with self.lock:
            self.started[name] = time.monotonic()
        if step.fault == self.fail:
            raise RuntimeError("scripted failure")
        window.wait_out()
        time.sleep(self.undo_s)
        with self.lock:
            self.done[name] = time.monotonic()
        event = FaultEvent(step.fault, "broker:1", "scripted")
        event.observe("done", "not done")
        return event


def _run(monkeypatch: pytest.MonkeyPatch, script: _Script, steps: list[FaultStep]) -> tuple[Nemesis, float]:
    monkeypatch.setattr(runner, "ACTIONS", {step.fault: script for step in steps})
    nemesis = Nemesis(FaultContext(cluster=None, topic="t", min_insync_replicas=2), steps)  # type: ignore[arg-type]
    nemesis.start()
    return nemesis, nemesis._t0


def test_overlapping_steps_are_in_effect_at_once_and_the_timeline_keeps_schedule_order(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _Script()
    nemesis, t0 = _run(monkeypatch, script, [_step("ack-loss", 0.5, 0.3), _step("latency", 0.1, 1.0)])
    outcome = nemesis.join()
    assert [event.fault for event in outcome.timeline] == ["latency", "ack-loss"]
    assert script.started["ack-loss@0.5"] - t0 == pytest.approx(0.5, abs=0.15)  # not after latency's window (1.1 s)
    assert script.done["ack-loss@0.5"] < script.done["latency@0.1"]


def test_a_step_that_overlaps_none_before_it_starts_once_their_undoing_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _Script(undo_s=0.5)
    nemesis, _ = _run(monkeypatch, script, [_step("latency", 0.0, 0.2), _step("ack-loss", 0.3, 0.2)])
    nemesis.join()
    assert script.started["ack-loss@0.3"] >= script.done["latency@0"]  # at 0.7 s, not at 0.3 s


def test_a_failing_step_cuts_the_overlapping_ones_short_and_fails_the_nemesis(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _Script(fail="ack-loss")
    nemesis, t0 = _run(monkeypatch, script, [_step("latency", 0.0, 30.0), _step("ack-loss", 0.2, 1.0), _step("request-loss", 40.0, 1.0)])
    with pytest.raises(RuntimeError, match="scripted failure"):
        nemesis.join()
    assert script.done["latency@0"] - t0 < 5 and "request-loss@40" not in script.started


def test_a_broker_holds_one_steps_proxy_rule_at_a_time() -> None:
    claims = ProxyClaims()
    assert claims.claim([1], "ack-loss") is None
    assert claims.claim([2, 1], "latency") == (1, "ack-loss")
    assert claims.claim([2], "latency") is None  # the refused claim took nothing
    claims.release([1])
    assert claims.claim([1, 3], "request-loss") is None

"""The nemesis runs a schedule's steps at their times: overlapping steps together, the others one
after another with each one's undoing done first; a broker's proxy holds one step's rule at a time.
Pure logic: the faults' actions are scripted, no cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from acklab.base.spec import SpecError
from acklab.cluster.topology import load_topology
from acklab.nemesis import runner
from acklab.nemesis.actions import FaultContext, ProxyClaims
from acklab.nemesis.events import FaultEvent, Window
from acklab.nemesis.runner import Nemesis, overlapping
from acklab.nemesis.schedule import FaultStep, check_schedule


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


def test_a_step_waits_for_an_earlier_one_it_overlaps_only_through_a_third(monkeypatch: pytest.MonkeyPatch) -> None:
    """A [0, 0.2] (undone by 0.7), B [0.1, 2.0], C [0.4, ...]: one run through B, yet C starts after A's undoing."""
    script = _Script(undo_s=0.5)
    nemesis, _ = _run(monkeypatch, script, [_step("rolling-restart", 0.0, 0.2), _step("latency", 0.1, 1.0), _step("leader-kill", 0.4, 0.2)])
    nemesis.join()
    assert script.started["leader-kill@0.4"] >= script.done["rolling-restart@0"]
    assert script.started["latency@0.1"] < script.done["rolling-restart@0"]


def test_only_the_step_before_the_load_lets_the_producers_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later step's action setting `settled` (as every action does once in effect) is not the before-load step's."""
    seen: dict[str, threading.Event] = {}

    def action(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
        seen[step.fault] = ctx.settled
        if not step.before_load:
            ctx.settled.set()
        window.wait_out()
        return FaultEvent(step.fault, "broker:1", "scripted")

    steps = [FaultStep(fault="leader-kill", at_s=0.0, duration_s=0.5, before_load=True), _step("latency", 0.1, 0.2)]
    monkeypatch.setattr(runner, "ACTIONS", {step.fault: action for step in steps})
    ctx = FaultContext(cluster=None, topic="t", min_insync_replicas=2)  # type: ignore[arg-type]
    nemesis = Nemesis(ctx, steps)
    nemesis.start()
    nemesis.join()
    assert seen["leader-kill"] is ctx.settled and seen["latency"] is not ctx.settled and not ctx.settled.is_set()


@pytest.mark.parametrize(
    ("first", "second", "refused"),
    [
        ("leader-kill", "follower-kill", "faults on broker processes must not overlap"),
        ("processor-kill", "zombie", "faults on pipeline processors must not overlap"),
        ("ack-loss", "lose-then-reject", None),  # proxy faults may: on one broker, the later is not applied
        ("leader-kill", "ack-loss", None),
    ],
)
def test_a_schedule_may_overlap_faults_unless_they_act_on_the_same_processes(first: str, second: str, refused: str | None) -> None:
    topology = load_topology("three-brokers")
    steps = [_step(first, 2.0, 5.0), _step(second, 4.0, 5.0)]
    if refused is None:
        check_schedule(steps, topology, "params.schedule")
    else:
        with pytest.raises(SpecError, match=f"params.schedule: {first} \\(2-7 s\\) and {second} \\(4-9 s\\) overlap; {refused}"):
            check_schedule(steps, topology, "params.schedule")
    check_schedule([_step(first, 2.0, 2.0), _step(second, 4.0, 5.0)], topology, "params.schedule")  # one after the other

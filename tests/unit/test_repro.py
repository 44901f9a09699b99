"""The repro's shrinking (pure logic: which smaller params it tries and keeps)."""

from __future__ import annotations

from typing import Any

from acklab.orchestration.repro import MIN_MESSAGES, shrink
from acklab.store.runs import RunDir


def test_shrinking_keeps_each_smaller_load_and_fault_that_stays_red_and_counts_its_runs() -> None:
    params: dict[str, Any] = {
        "messages": 4000,
        "schedule": [{"fault": "leader-kill", "duration_s": 8.0}, {"fault": "ack-loss", "duration_s": 8.0}],
    }
    tried: list[dict[str, Any]] = []

    def red(candidate: dict[str, Any]) -> RunDir | None:  # red while the ack-loss step is in and lasts 2 s or more
        tried.append(candidate)
        steps = {step["fault"]: step["duration_s"] for step in candidate["schedule"]}
        return RunDir.__new__(RunDir) if steps.get("ack-loss", 0) >= 2 and candidate["messages"] >= 1000 else None

    smallest, run, steps = shrink(params, red, limit=20)
    assert run is not None and len(steps) == len(tried) <= 20
    assert smallest["messages"] == 1000
    assert smallest["schedule"] == [{"fault": "ack-loss", "duration_s": 2.0}]
    assert steps[0] == "messages 4000 -> 2000: still red"
    assert any(step.endswith("not red, kept the previous") for step in steps)


def test_shrinking_stops_at_its_run_limit_and_at_the_smallest_load() -> None:
    runs = []
    smallest, run, steps = shrink({"messages": 100_000, "schedule": []}, lambda c: runs.append(c) or RunDir.__new__(RunDir), limit=3)
    assert len(runs) == len(steps) == 3 and smallest["messages"] == 12_500
    smallest, run, steps = shrink({"messages": MIN_MESSAGES * 2 - 1, "schedule": []}, lambda c: None, limit=3)
    assert (smallest["messages"], run, steps) == (MIN_MESSAGES * 2 - 1, None, [])


def test_shrinking_drops_each_setting_of_its_own_profile_that_the_red_row_does_not_need() -> None:
    """Red while linger.ms is 500 (a typed setting) and whatever batch.size is: batch.size and the
    requests in flight are dropped, linger.ms and the class-defining settings stay."""
    spec = {"acks": "all", "enable_idempotence": True, "linger_ms": 500, "max_in_flight": 2, "overrides": {"batch.size": 1_000_000}}
    params: dict[str, Any] = {"messages": MIN_MESSAGES, "schedule": [], "custom_profiles": {"idem-x1": spec}}

    def red(candidate: dict[str, Any]) -> RunDir | None:
        return RunDir.__new__(RunDir) if candidate["custom_profiles"]["idem-x1"].get("linger_ms") == 500 else None

    smallest, run, steps = shrink(params, red, limit=20)
    assert smallest["custom_profiles"]["idem-x1"] == {"acks": "all", "enable_idempotence": True, "linger_ms": 500, "overrides": {}}
    assert "idem-x1 without linger_ms: not red, kept the previous" in steps and "idem-x1 without max_in_flight: still red" in steps


def test_shrinking_never_halves_the_load_under_a_fault_that_would_then_start_after_it() -> None:
    for at_s, halvings in ((6.0, []), (3.0, [50_000])):  # 10 s of load: halved to 5 s, then 2.5 s
        tried: list[dict[str, Any]] = []
        params = {"messages": 100_000, "rate": 10_000.0, "schedule": [{"fault": "ack-loss", "at_s": at_s, "duration_s": 1.0}]}
        shrink(params, lambda c, tried=tried: tried.append(c) or RunDir.__new__(RunDir), limit=5)
        assert [c["messages"] for c in tried] == halvings

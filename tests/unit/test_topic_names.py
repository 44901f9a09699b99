"""Scenario topics are valid Kafka topic names, also for schedules of several faults."""

from __future__ import annotations

import re
from pathlib import Path

from acklab.orchestration.execution import topic_name
from acklab.plan.planner import make_plan
from acklab.store.runs import RunDir


def test_a_schedule_of_two_faults_gets_a_valid_topic() -> None:
    plan = make_plan({
        "profiles": ["idempotent"],
        "schedule": [
            {"at_s": 2.0, "fault": "request-hold", "duration_s": 9.0, "options": {"delay_s": 8.0, "count": 1}},
            {"at_s": 4.0, "fault": "error-inject", "duration_s": 6.0},
        ],
    })
    (scenario,) = plan.checked
    assert "+" in scenario.name
    topic = topic_name(RunDir(Path("/runs/20261122T000000-abcdef")), scenario.name)
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic), topic

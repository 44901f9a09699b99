"""confluent-kafka's consumer commit takes no timeout and blocks while no group coordinator answers:
the librdkafka processor bounds it, and an instance whose commit overran stops as `stuck` without
touching its consumer again. A real librdkafka consumer, with no broker behind its bootstrap (port 9
on loopback): nothing is sent anywhere."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from acklab.workload import processor as module
from acklab.workload.processing import ProcessorJob
from acklab.workload.processor import STUCK, Overran, Processor


def test_a_blocked_consumer_commit_is_bounded_and_the_instance_stops_stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "STEP_S", 1.0)
    monkeypatch.setattr(module, "OVERRUN_GRACE_S", 1.0)
    monkeypatch.setattr(Processor, "install_signals", lambda self: None)  # the test process keeps its own signals
    log = tmp_path / "0.0.jsonl"
    job = ProcessorJob(
        bootstrap_servers="127.0.0.1:9", input_topic="in", output_topic="in-out", group_id="g", instance=0, style="at-least-once", log=str(log),
        consumer_config={"log_level": "0"}, producer_config={"log_level": "0"},  # no "connection refused" lines
    )
    processor = Processor(job)
    started = time.monotonic()
    with pytest.raises(Overran) as raised:
        processor._commit({"0": 5})
    assert raised.value.call == "commit"
    assert 2.0 <= time.monotonic() - started < 10.0  # its budget and grace, not librdkafka's (none)
    processor._stuck(raised.value)
    closing = time.monotonic()
    processor._close()  # a consumer blocked in commit is not closed (its close would block too)
    assert time.monotonic() - closing < 10.0
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["ev"] for e in events if e["ev"] in ("overran", "error", "stop")] == ["overran", "error", "stop"]
    assert events[-1]["reason"] == STUCK and processor.stopping == STUCK
    assert next(e for e in events if e["ev"] == "overran")["call"] == "commit"
    assert next(e for e in events if e["ev"] == "error")["fatal"] is True


def test_a_call_blocked_when_the_stop_comes_is_abandoned_soon_after_its_own_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopping processor does not give a blocked call `OVERRUN_GRACE_S`: its work is done, and the
    wait only delays the stop (a group-coordinator-kill left send_offsets blocked for minutes)."""
    monkeypatch.setattr(module, "STEP_S", 1.0)
    monkeypatch.setattr(module, "OVERRUN_GRACE_S", 30.0)
    monkeypatch.setattr(module, "STOP_GRACE_S", 0.5)
    monkeypatch.setattr(Processor, "install_signals", lambda self: None)
    log = tmp_path / "0.0.jsonl"
    job = ProcessorJob(
        bootstrap_servers="127.0.0.1:9", input_topic="in", output_topic="in-out", group_id="g", instance=0, style="at-least-once", log=str(log),
        consumer_config={"log_level": "0"}, producer_config={"log_level": "0"},
    )
    processor = Processor(job)
    threading.Timer(0.3, lambda: setattr(processor, "stopping", "SIGTERM")).start()  # as the SIGTERM handler does
    started = time.monotonic()
    with pytest.raises(Overran):
        processor._commit({"0": 5})
    assert 1.5 <= time.monotonic() - started < 5.0  # its timeout and the stop's grace, not the 30 s overrun grace
    overran = next(json.loads(line) for line in log.read_text().splitlines() if json.loads(line)["ev"] == "overran")
    assert overran["call"] == "commit" and overran["waited_s"] >= 1.5
    processor._stuck(Overran("commit", "bounded"))
    processor._close()

"""Presets: each plans as a valid run, and its claims are checked against evidence, not printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.plan import make_plan
from acklab.presets import BUGS, FIELD_NOTES, PRESETS, Evidence, both, client_stat, count, errors, fatal, fixed_in, with_preset
from acklab.spec import SpecError
from acklab.store import RunDir, ScenarioEntry


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_plans_and_names_its_claims_scenarios(name: str) -> None:
    plan = make_plan(with_preset(name, {}))
    assert plan.params.preset == name
    scenarios = {s.name for s in plan.scenarios}
    assert PRESETS[name].observations and {o.scenario for o in PRESETS[name].observations} <= scenarios
    assert PRESETS[name].source.startswith("field-notes #") == (name in FIELD_NOTES) != (name in BUGS)


def test_the_field_notes_are_covered_but_the_first() -> None:
    sources = {PRESETS[name].source for name in FIELD_NOTES}
    assert sources == {f"field-notes #{n}" for n in (2, 3, 4, 5, 6, 7, 8)}


def test_an_unknown_preset_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError, match="unknown preset 'nope'; valid: field-notes-2"):
        make_plan({"preset": "nope"})


def evidence(row: dict, kafka_version: str = "4.3.1", **entry: object) -> Evidence:
    return Evidence({"planned": 1000, **row}, ScenarioEntry(scenario="p__f", **entry), RunDir(Path("/nonexistent")), kafka_version)


def test_a_bug_check_expects_the_bug_before_its_fix_and_not_from_it_on() -> None:
    desync = "p0: OUT_OF_ORDER_SEQUENCE_NUMBER: ProduceRequest ... failed due to sequence desynchronization"
    client = fixed_in("client", "2.3.0", fatal("OUT_OF_ORDER_SEQUENCE_NUMBER"), count("fatal", "==", 0))
    assert client(evidence({"fatal": 800}, client_version="2.2.0", fatal_error=desync)) == (True, f"client 2.2.0: fatal error: {desync}")
    assert client(evidence({"fatal": 0}, client_version="2.2.0")) == (False, "client 2.2.0: no fatal error")
    assert client(evidence({"fatal": 0}, client_version="2.16.1")) == (True, "client 2.16.1: fatal = 0 of 1,000 planned")
    assert client(evidence({"fatal": 800}, client_version="2.10.0", fatal_error=desync))[0] is False  # 2.10 > 2.3: numeric order
    broker = fixed_in("kafka", "3.6.0", count("hanging_partitions", ">", 0), count("hanging_partitions", "==", 0))
    assert broker(evidence({"hanging_partitions": 1}, kafka_version="3.5.2")) == (True, "kafka 3.5.2: hanging_partitions = 1 of 1,000 planned")
    assert broker(evidence({"hanging_partitions": 0}, kafka_version="3.5.2"))[0] is False
    assert broker(evidence({"hanging_partitions": 0}, kafka_version="3.6.2"))[0] is True


def test_checks_compare_measurements_with_the_claim() -> None:
    assert count("duplicates", ">", 0)(evidence({"duplicates": 12})) == (True, "duplicates = 12 of 1,000 planned")
    assert count("lost", "==", 0)(evidence({"lost": 3}))[0] is False
    seen = evidence({}, delivery_errors={"_MSG_TIMED_OUT": 40, "NOT_ENOUGH_REPLICAS": 2})
    assert errors("NOT_ENOUGH_REPLICAS")(seen) == (True, "delivery errors: _MSG_TIMED_OUT x40, NOT_ENOUGH_REPLICAS x2")
    assert errors("_TIMED_OUT")(seen)[0] is False
    stats = evidence({}, producer_stats={"req_timeouts": 4, "disconnects": 0})
    assert both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0))(stats) == (
        False, "client statistics req_timeouts = 4; client statistics disconnects = 0"
    )

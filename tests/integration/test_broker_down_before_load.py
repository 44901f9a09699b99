"""Field note #1 on a real single-broker cluster: the topic exists, the broker is stopped before the
producer starts (a schedule step `before_load`), so no metadata ever arrives. The write-up's Java
client waits max.block.ms in each send() and fails the record with a TimeoutException; librdkafka,
beside it, lets each record expire after message.timeout.ms. Nothing is sent or retried, nothing
stored; the guarantee model passes both rows."""

from __future__ import annotations

import pytest

from acklab.plan import presets
from acklab.plan.planner import make_plan

from .helpers import run_audited

pytestmark = pytest.mark.integration

PRESET = "field-notes-1-broker-down-before-first-send"


def test_a_broker_down_before_the_first_send_fails_every_record_unsent() -> None:
    params = presets.with_preset(PRESET, {})
    messages = params["messages"]
    block_ms = int(params["custom_profiles"]["fn1-acks1"]["java"]["max.block.ms"])
    plan = make_plan({**params, "negative_control": False})  # the negative controls are test_negative_control's subject
    run = run_audited([plan])
    manifest, rows = run.read_manifest(), {row["scenario"]: row for row in run.read_matrix()}
    errors = {"java": {"TimeoutException": messages}, "librdkafka": {"_MSG_TIMED_OUT": messages}}
    entries = [entry for entry in manifest.scenarios if not entry.control]
    assert sorted(entry.client_family for entry in entries) == ["java", "librdkafka"]
    for scenario, entry in zip(plan.checked, entries, strict=True):
        row = rows[entry.scenario]
        (event,) = entry.fault_timeline
        assert event.action == "stop" and event.effective and entry.fault_effective, event
        assert event.effective_at is not None and event.effective_at <= entry.load_started  # down before any producer existed
        assert event.ended is not None and event.ended >= entry.load_ended  # and until the load was over
        assert entry.evidence_complete, entry.incomplete_reason  # Java's TimeoutException in send() is a failure, not a refusal
        assert entry.delivery_errors == errors[entry.client_family]
        assert (entry.producer_stats["txmsgs"], entry.producer_stats["txretries"]) == (0, 0)
        assert (row["failed_clean"], row["refused"], row["acked"], row["records_read"], row["lost"]) == (messages, 0, 0, 0, 0)
        broken = [e.text() for e in scenario.expected.expectations if not e.holds(row[e.column])]
        assert broken == [], broken  # the model's verdict: leader-durable, failed cleanly is allowed under a fault
    observed = presets.observe(run, manifest, list(rows.values()), {})
    assert {o["client"].split()[0] for o in observed} == {"kafka-clients", "confluent-kafka"}
    assert [o for o in observed if o["status"] != "reproduced"] == []
    java = [o["measured"] for o in observed if "max.block.ms for metadata" in o["claim"]]
    assert len(java) == 1 and f"not present in metadata after {block_ms} ms" in java[0]

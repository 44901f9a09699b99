"""Field note #1 on a real single-broker cluster: the topic exists, the broker is stopped before the
producer starts (a schedule step `before_load`), so no metadata ever arrives. Every record expires
in the client, nothing is sent or retried, nothing stored; the guarantee model passes the row."""

from __future__ import annotations

import pytest

from acklab.plan import presets
from acklab.plan.planner import make_plan

from .helpers import run_audited

pytestmark = pytest.mark.integration

PRESET = "field-notes-1-broker-down-before-first-send"


def test_a_broker_down_before_the_first_send_fails_every_record_unsent() -> None:
    plan = make_plan(presets.with_preset(PRESET, {}))
    run = run_audited([plan])
    manifest, (row,) = run.read_manifest(), run.read_matrix()
    (entry,) = manifest.scenarios
    (event,) = entry.fault_timeline
    assert event.action == "stop" and event.effective and entry.fault_effective, event
    assert event.effective_at is not None and event.effective_at <= entry.load_started  # down before any producer existed
    assert event.ended is not None and event.ended >= entry.load_ended  # and until the load was over
    assert entry.evidence_complete, entry.incomplete_reason
    assert entry.delivery_errors == {"_MSG_TIMED_OUT": presets.FN1_MESSAGES}
    assert (entry.producer_stats["txmsgs"], entry.producer_stats["txretries"]) == (0, 0)
    assert (row["failed_clean"], row["acked"], row["records_read"], row["lost"]) == (presets.FN1_MESSAGES, 0, 0, 0)
    (scenario,) = plan.scenarios
    broken = [e.text() for e in scenario.expected.expectations if not e.holds(row[e.column])]
    assert broken == [], broken  # the model's verdict: leader-durable, failed cleanly is allowed under a fault
    observed = presets.observe(run, manifest, [row], {})
    assert [o["status"] for o in observed] == ["reproduced"] * len(presets.PRESETS[PRESET].observations), observed

"""The weekly field-notes DAG end to end under `airflow dags test`: every preset on its own real
cluster, audited by Spark, judged by GX, and one page with each claim and its measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.plan.presets import FIELD_NOTES, PRESETS
from acklab.store.runs import RunDir

from .helpers import assert_nothing_left, dags_test

pytestmark = pytest.mark.integration

SLICE = "field-notes-3-not-enough-replicas"  # the family's cheapest meaningful slice: about a minute, both clients


def test_a_field_notes_preset_reproduces_every_claim_on_both_clients(tmp_path: Path) -> None:
    """`make test`'s slice of the field-notes family: one preset through the CLI, each of its
    claims reproduced on each client it applies to (a claim not reproduced, or untested because its
    evidence was incomplete, fails the test)."""
    runs = tmp_path / "runs"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "acklab"), "run", "--preset", SLICE, "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "ACKLAB_RUNS": str(runs)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = [RunDir(path) for path in runs.iterdir() if (path / "manifest.json").exists()]
    observations = run.read_result()["observations"]
    expected = [o.claim for o in PRESETS[SLICE].observations for _ in range(len(o.families) if o.families else 2)]
    assert sorted(o["claim"] for o in observations) == sorted(expected)
    assert [o for o in observations if o["status"] != "reproduced"] == [], observations
    assert sum("CLAIM REPRODUCED: " in line for line in done.stderr.splitlines()) == len(expected)


# The field notes' claims acklab refutes (preset, claim, client package): a write-up's "no loss" that
# matching every record by id disproves (measured: acks=0 lost 14,196 and 19,924, acks=1 2,086 and
# 3,107 of 100,000 on Java and librdkafka), and a request timeout librdkafka enforces only while the
# broker is reachable (its statistics count no timeout under the 30 s latency).
MAY_BE_REFUTED = {
    *(("field-notes-4-acks0-vs-acks1-leader-kill", f"acks={acks}: no loss (log-end offsets unchanged)", client)
      for acks in (0, 1) for client in ("kafka-clients", "confluent-kafka")),
    ("field-notes-8-latency-30s", "request.timeout.ms=1500: requests time out and the client reconnects", "confluent-kafka"),
}


@pytest.mark.field_notes
def test_field_notes_dag_runs_every_preset_and_publishes_one_page(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    result = dags_test(acklab_env, {}, dag_id="kafka_field_notes", timeout_s=3600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    (summary_file,) = (isolated_run_store / "field-notes").glob("*/field-notes.json")
    summary = json.loads(summary_file.read_text())
    assert summary["status"] != "fail"
    assert sorted(run["preset"] for run in summary["runs"]) == sorted(FIELD_NOTES)
    for run in summary["runs"]:
        claims = [o["claim"] for o in run["observations"]]
        # a claim of every client once per client (Java and librdkafka), a client's own claim once
        expected = [o.claim for o in PRESETS[run["preset"]].observations for _ in range(len(o.families) if o.families else 2)]
        assert sorted(claims) == sorted(expected), run["preset"]
        # each claim measured (never untested), and reproduced unless it is one acklab is known to refute
        assert all(o["status"] in {"reproduced", "not reproduced"} and o["measured"] for o in run["observations"]), run["preset"]
        refuted = {(run["preset"], o["claim"], o["client"].split()[0]) for o in run["observations"] if o["status"] == "not reproduced"}
        assert refuted <= MAY_BE_REFUTED, refuted - MAY_BE_REFUTED
        assert_nothing_left(isolated_run_store / run["run"] / "cluster")
    page = (summary_file.parent / "index.html").read_text()
    assert all(name in page for name in FIELD_NOTES)

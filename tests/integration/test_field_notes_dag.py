"""The weekly field-notes DAG end to end under `airflow dags test`: every preset on its own real
cluster, audited by Spark, judged by GX, and one page with each claim and its measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acklab.plan.presets import FIELD_NOTES, PRESETS

from .helpers import assert_nothing_left, dags_test

pytestmark = [pytest.mark.integration, pytest.mark.field_notes]


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
        assert all(o["status"] in {"reproduced", "not reproduced", "untested"} and o["measured"] for o in run["observations"])
        assert_nothing_left(isolated_run_store / run["run"] / "cluster")
    page = (summary_file.parent / "index.html").read_text()
    assert all(name in page for name in FIELD_NOTES)

"""`make bench-matrix`'s phase spans, from an `airflow dags test` log and a Spark event log (pure parsing)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from acklab.tools.bench_matrix import audit_spans, task_spans

LOG = """\
2026-11-25T19:49:50.678883Z [info     ] [DAG TEST] starting task_id=plan map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T19:49:56.377994Z [info     ] Pushing xcom                   [task] loc=task_runner.py:2280
2026-11-25T19:49:56.453482Z [info     ] [DAG TEST] end task task_id=plan map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1563
2026-11-25T19:50:07.073439Z [info     ] [DAG TEST] starting task_id=run_group map_index=2 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T19:50:47.769364Z [info     ] [DAG TEST] end task task_id=run_group map_index=2 [airflow.sdk.definitions.dag] loc=dag.py:1563
2026-11-25T19:50:47.769567Z [info     ] [DAG TEST] starting task_id=run_group map_index=5 [airflow.sdk.definitions.dag] loc=dag.py:1501
"""


def test_each_finished_task_is_a_span_and_an_unfinished_one_is_not() -> None:
    spans = task_spans(LOG)
    assert [(task, index) for task, index, _ in spans] == [("plan", -1), ("run_group", 2)]
    assert [seconds for _, _, seconds in spans] == pytest.approx([5.774599, 40.695925])


def test_each_finished_sql_execution_and_job_outside_one_is_a_span_then_the_application(tmp_path: Path) -> None:
    sql = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecution"
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1000},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 1500, "Stage Infos": [{"Stage Name": "collect at audit.py:200"}], "Properties": {}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 1900},
        {"Event": f"{sql}Start", "executionId": 0, "description": "parquet at X", "time": 2000},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 2100, "Properties": {"spark.sql.execution.id": "0"}},
        {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": 47000},
        {"Event": f"{sql}End", "executionId": 0, "time": 47500},
        {"Event": f"{sql}Start", "executionId": 1, "description": "collect at audit.py:520", "time": 48000},
        {"Event": f"{sql}Start", "executionId": 2, "description": "never ended", "time": 49000},
        {"Event": f"{sql}End", "executionId": 1, "time": 54250},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 60000},
    ]
    log = tmp_path / "events.json"
    log.write_text("\n".join(json.dumps(event) for event in events))
    assert audit_spans(log) == [
        ("job 0 (collect at audit.py:200)", 0.4),
        ("sql 0 (parquet at X)", 45.5),
        ("sql 1 (collect at audit.py:520)", 6.25),
        ("spark application", 59.0),
    ]


def test_the_remainder_splits_each_group_around_its_loads_and_adds_up_to_wall_minus_loads() -> None:
    from acklab.store.runs import GroupTiming, PipelineEvidence, ScenarioEntry
    from acklab.tools.bench_matrix import group_split, remainder

    def entry(name: str, group: GroupTiming, started: float, ended: float, family: str = "librdkafka", pipeline: bool = False) -> ScenarioEntry:
        evidence = PipelineEvidence(style="eos", processors=2, group_id="g", output_topic="t-out", logs="p", ends={}, committed={}, exits={}) if pipeline else None
        return ScenarioEntry(scenario=name, profile=name, topic=name, send_log="s", messages_planned=1, client_family=family, group=group,
                             load_started=started, load_ended=ended, pipeline=evidence)

    java = GroupTiming(index=0, started=100.0, ended=130.0, scenarios=2)
    pipeline = GroupTiming(index=1, started=131.0, ended=170.0, scenarios=1)
    scenarios = [entry("a", java, 103.0, 123.0, "java"), entry("b", java, 104.0, 124.0, "java"), entry("c", pipeline, 132.0, 152.0, pipeline=True)]
    split = group_split(scenarios)
    assert split == {0: ("java", 3.0, 20.0, 6.0), 1: ("pipeline", 1.0, 20.0, 18.0)}
    groups = {0: 30.0, 1: 39.0}
    spans = [("plan", -1, 2.0), ("run_group", 0, 31.0), ("run_group", 1, 40.0), ("audit", -1, 10.0)]
    lines = remainder(90.0, split, groups, spans)
    assert "remainder java groups (1): before the loads 3 s, after them 6 s, loads' spread 1 s" in lines
    assert "remainder pipeline groups (1): before the loads 1 s, after them 18 s, loads' spread 0 s" in lines
    assert "remainder the Airflow tasks around the groups: 2 s" in lines
    assert "remainder between the tasks (scheduling, dags test): 7 s" in lines
    numbers = [float(n) for line in lines for n in re.findall(r"(-?[\d.]+) s\b", line)]
    assert sum(numbers) + 40.0 == pytest.approx(90.0, abs=0.5)  # wall = loads (20 + 20) + the remainder

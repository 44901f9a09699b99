"""`make bench-matrix`'s phase spans, from an `airflow dags test` log (pure parsing)."""

from __future__ import annotations

import pytest

from acklab.tools.bench_matrix import task_spans

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

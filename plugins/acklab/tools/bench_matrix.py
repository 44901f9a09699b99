"""`make bench-matrix`: the daily DAG (the standard matrix) once through `airflow dags test`, timed.

Prints the wall time of the whole DAG run and the median scenario overhead: for each scenario, the
wall time of its group (fresh topics, load, fault recovery, health gate) minus its own load, plus an
equal share of the run's fixed costs (Airflow, provisioning, Spark audit, GX validation, report).
Scenarios of a group run side by side, but each is charged its whole group's overhead; the
amortized figure (all non-load wall time over all scenarios) is printed too, for information.

Then one line per phase, from the DAG test log's task spans (`task_spans`): plan, provision, each
group's task with its longest load and the rest (its overhead), the audit, validation (with the
report), teardown; each group's line also splits its overhead: before its first send, after its
last producer's end, and the Airflow task around it. Then `remainder ...` lines: the night's seconds
beyond its loads by where they go (per kind of group, before and after the loads; the tasks around the
groups; each other task; between the tasks), adding up to wall - loads; and last `matrix wall seconds: W`, `loads seconds: L` (each group's longest
load, added up) and `ratio wall/loads: W/L`. A line before them sums up the brokers' stalls
(`acklab.cluster.stalls`): the controller's slow events and the GC pauses. The audit's phase is
followed by one line per Spark job and SQL execution of it (its call site and seconds), from the event
log the benchmark has the audit write (kept as the run's `bench-spark-events.json`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from acklab.base.paths import runs_dir
from acklab.cluster import stalls
from acklab.store.runs import ScenarioEntry, runs

DAG_ID = "kafka_delivery_matrix"
SPAN = re.compile(r"^(?P<at>\S+Z) .*\[DAG TEST\] (?P<what>starting|end task) task_id=(?P<task>\S+) map_index=(?P<index>-?\d+)", re.M)


def task_spans(log: str) -> list[tuple[str, int, float]]:
    """(task id, map index, seconds) of each task `airflow dags test` ran, in the order they ended."""
    started: dict[tuple[str, int], float] = {}
    spans = []
    for match in SPAN.finditer(log):
        key = (match["task"], int(match["index"]))
        at = dt.datetime.fromisoformat(match["at"].replace("Z", "+00:00")).timestamp()
        if match["what"] == "starting":
            started[key] = at
        elif key in started:
            spans.append((*key, at - started.pop(key)))
    return spans


def audit_spans(event_log: Path) -> list[tuple[str, float]]:
    """(label, seconds) of each Spark SQL execution (``sql N (description)``) and each job outside one
    (``job N (its first stage's name)``: the audit's topic read) in an event log, in the order they
    ended, then ("spark application", seconds from its start to its end)."""
    started: dict[str, tuple[str, int]] = {}
    spans, app = [], [0, 0]
    for line in event_log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"].rsplit(".", 1)[-1]
        if kind == "SparkListenerSQLExecutionStart":
            started[f"sql {event['executionId']}"] = (event["description"], event["time"])
        elif kind == "SparkListenerJobStart" and "spark.sql.execution.id" not in event.get("Properties", {}):
            stages = event.get("Stage Infos") or [{}]
            started[f"job {event['Job ID']}"] = (stages[0].get("Stage Name", "?"), event["Submission Time"])
        elif kind in ("SparkListenerSQLExecutionEnd", "SparkListenerJobEnd"):
            key = f"sql {event['executionId']}" if kind.endswith("ExecutionEnd") else f"job {event['Job ID']}"
            if key in started:
                description, at = started.pop(key)
                spans.append((f"{key} ({description})", (event["time" if key[0] == "s" else "Completion Time"] - at) / 1000))
        elif kind in ("SparkListenerApplicationStart", "SparkListenerApplicationEnd"):
            app[kind.endswith("End")] = event["Timestamp"]
    return [*spans, ("spark application", (app[1] - app[0]) / 1000)]


def group_split(scenarios: list[ScenarioEntry]) -> dict[int, tuple[str, float, float, float]]:
    """Per group index: its kind (`pipeline`, `java` or `librdkafka`: a group with a pipeline is a
    pipeline group), seconds from its start to its first send, its longest load, and seconds from its
    last producer's end to its end (drain, fault recovery, health gate, evidence)."""
    by_group: dict[int, list[ScenarioEntry]] = {}
    for entry in scenarios:
        if entry.group is not None and entry.load_started is not None and entry.load_ended is not None:
            by_group.setdefault(entry.group.index, []).append(entry)
    split = {}
    for index, entries in by_group.items():
        group = entries[0].group
        assert group is not None
        kind = "pipeline" if any(e.pipeline is not None for e in entries) else entries[0].client_family
        first = min(e.load_started for e in entries if e.load_started is not None)
        last = max(e.load_ended for e in entries if e.load_ended is not None)
        longest = max(e.load_ended - e.load_started for e in entries if e.load_ended is not None and e.load_started is not None)
        split[index] = (kind, first - group.started, longest, group.ended - last)
    return split


def remainder(wall: float, split: dict[int, tuple[str, float, float, float]], groups: dict[int, float],
              spans: list[tuple[str, int, float]]) -> list[str]:
    """The night's seconds beyond its loads, by where they go: per kind of group, before and after
    the loads (and the loads' own spread: the longest load against the group's first send to last
    end), the Airflow task around each group, and every other task; they add up to wall - loads."""
    lines = []
    kinds = sorted({kind for kind, *_ in split.values()})
    for kind in kinds:
        mine = [i for i, (k, *_) in split.items() if k == kind]
        before = sum(split[i][1] for i in mine)
        after = sum(split[i][3] for i in mine)
        spread = sum(groups[i] - split[i][1] - split[i][2] - split[i][3] for i in mine)
        lines.append(f"remainder {kind} groups ({len(mine)}): before the loads {before:.0f} s, after them {after:.0f} s, loads' spread {spread:.0f} s")
    around = sum(seconds - groups[index] for task, index, seconds in spans if task == "run_group" and index in groups)
    lines.append(f"remainder the Airflow tasks around the groups: {around:.0f} s")
    others = [(task, seconds) for task, index, seconds in spans if task != "run_group"]
    for task in dict.fromkeys(task for task, _ in others):
        lines.append(f"remainder {task}: {sum(s for t, s in others if t == task):.0f} s")
    accounted = sum(seconds for _, _, seconds in spans)
    lines.append(f"remainder between the tasks (scheduling, dags test): {wall - accounted:.0f} s")
    return lines


def main(conf: str = typer.Option("{}", help="DAG params as JSON (default: the standard matrix)")) -> None:
    before = {run.run_id for run in runs()}
    airflow = Path(sys.executable).parent / "airflow"
    spark = Path(tempfile.mkdtemp(prefix="acklab-bench-spark-"))
    (spark / "events").mkdir()
    (spark / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{spark / 'events'}\nspark.eventLog.compress false\nspark.eventLog.rolling.enabled false\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [str(airflow), "dags", "test", DAG_ID, "-c", conf],
        env={**os.environ, "ACKLAB_BIND_CLUSTER_TO_PID": "1", "SPARK_CONF_DIR": str(spark)}, capture_output=True, text=True,
    )
    wall = time.monotonic() - started
    new = [run for run in runs() if run.run_id not in before and run.manifest.exists()]
    if len(new) != 1:
        kept = Path(tempfile.mkstemp(prefix="acklab-bench-matrix-", suffix=".log")[1])
        kept.write_text(done.stdout + done.stderr)
        print(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"expected one new run in {runs_dir()}, found {len(new)} (dags test exit {done.returncode}; its log: {kept})")
    (run,) = new
    run.dags_test_log.write_text(done.stdout + done.stderr)
    logs = sorted((spark / "events").iterdir())
    if logs:
        shutil.move(logs[-1], run.root / "bench-spark-events.json")
    shutil.rmtree(spark)
    scenarios = run.read_manifest().scenarios
    groups = {s.group.index: s.group.ended - s.group.started for s in scenarios if s.group}
    fixed = wall - sum(groups.values())
    loads = [s.load_ended - s.load_started for s in scenarios]
    overheads = [groups[s.group.index] - load + fixed / len(scenarios) for s, load in zip(scenarios, loads, strict=True)]
    longest = {i: max(load for s, load in zip(scenarios, loads, strict=True) if s.group.index == i) for i in groups}
    amortized = (wall - sum(longest.values())) / len(scenarios)
    result = run.read_result() if run.result.exists() else {"status": "no result"}
    statuses = result.get("scenarios", {})
    print(f"run: {run.root} (DAG log: {run.dags_test_log})")
    print(f"dags test exit: {done.returncode}; status: {result['status']}; "
          + ", ".join(f"{v} {sum(1 for s in statuses.values() if s == v)}" for v in ("pass", "fail", "incomplete")))
    print(f"scenarios: {len(scenarios)} in {len(groups)} groups; median load seconds: {statistics.median(loads):.1f}")
    print(f"group wall seconds: {sum(groups.values()):.0f}; fixed seconds (Airflow, cluster, Spark, GX, report): {fixed:.0f}")
    print(f"amortized overhead seconds per scenario (matrix wall minus each group's longest load, / scenarios): {amortized:.1f}")
    print(f"incomplete scenarios: {sum(1 for s in statuses.values() if s == 'incomplete')}")
    print(f"scenarios run again (first run's evidence incomplete): {sum(1 for s in scenarios if s.earlier_attempts)}")
    print(f"scenarios disturbed (unplanned leader change, ISR shrink or controller move): {sum(1 for s in scenarios if s.disturbances)}")
    print(f"median scenario overhead seconds: {statistics.median(overheads):.1f}")
    print(f"broker stalls: {stalls.summary(run.cluster)}")
    labels = {s.group.index: s.fault + (" (negative control)" if s.control else "") for s in scenarios if s.group}
    split = group_split(scenarios)
    spans = task_spans(done.stdout + done.stderr)
    for task, index, seconds in spans:
        if task == "run_group" and index in longest:
            kind, before, load, after = split[index]
            print(f"phase group {index} {labels[index]} [{kind}]: {seconds:.1f} s, load {longest[index]:.1f} s, overhead {seconds - longest[index]:.1f} s"
                  f" (before its load {before:.1f} s, after it {after:.1f} s, the task around the group {seconds - groups[index]:.1f} s)")
        else:
            print(f"phase {task}{f'[{index}]' if index >= 0 else ''}: {seconds:.1f} s")
        if task == "audit" and (run.root / "bench-spark-events.json").exists():
            for label, spark_s in audit_spans(run.root / "bench-spark-events.json"):
                print(f"  audit {label}: {spark_s:.1f} s")
    for line in remainder(wall, split, groups, spans):
        print(line)
    loads_total = sum(longest.values())
    print(f"matrix wall seconds: {wall:.0f}")
    print(f"loads seconds: {loads_total:.0f}")
    print(f"ratio wall/loads: {wall / loads_total:.2f}")


if __name__ == "__main__":
    typer.run(main)

"""The pages acklab shows inside the Airflow UI, rendered from the run history: the latest run of
each setting, the runs of one DAG run, and the verdict timeline per scenario with its chart."""

from __future__ import annotations

import os
import time

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.checker.gx_project import data_docs_site
from acklab.report.charts import verdict_history
from acklab.report.html import beliefs_page
from acklab.store.history import RunRecord, recent_runs, runs_of, verdicts
from acklab.store.runs import RunDir

COUNTS = ("sent", "acked", "failed", "lost", "duplicates", "reordered")
HISTORY_RUNS = 30


def _render(template: str, **values: object) -> str:
    return Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape(default=True)).get_template(template).render(**values)


def settings(run: RunRecord) -> str:
    """How a page names the settings runs are compared under."""
    return f"{run.topology} · Kafka {run.kafka_version}" + (f" · client {run.client_version}" if run.client_version else "")


def _runs_page(root: str, title: str, empty: str, runs: list[RunRecord]) -> str:
    finished = {run.run_id: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.finished)) for run in runs}
    beliefs = {run.run_id: beliefs_page(run.run_id) for run in runs if (data_docs_site() / beliefs_page(run.run_id)).exists()}
    return _render(
        "ui_runs.html.j2", root=root, title=title, empty=empty, runs=runs, finished=finished,
        verdicts=verdicts([run.run_id for run in runs]), counts=COUNTS, beliefs=beliefs,
    )


def latest_page(root: str) -> str:
    """The newest run of each setting (topology, Kafka version, client version), newest first."""
    latest: dict[str, RunRecord] = {}
    for run in recent_runs(200):
        latest.setdefault(settings(run), run)
    return _runs_page(root, "Latest delivery matrix", "No run is in the history yet: trigger a delivery DAG.", list(latest.values()))


def dag_run_page(root: str, dag_id: str, dag_run_id: str) -> str:
    """The runs one DAG run recorded, with their verdicts."""
    return _runs_page(
        root, f"{dag_id} · {dag_run_id}", "This DAG run recorded no acklab run (yet): its verdicts appear once it is validated.",
        runs_of(dag_id, dag_run_id),
    )


def _timeline() -> tuple[list[RunRecord], dict[str, dict[str, dict[str, str]]]]:
    """The last runs (oldest first) and, per setting, per scenario, each run's verdict."""
    runs = recent_runs(HISTORY_RUNS)[::-1]
    found = verdicts([run.run_id for run in runs])
    timelines: dict[str, dict[str, dict[str, str]]] = {}
    for run in runs:
        scenarios = timelines.setdefault(settings(run), {})
        for scenario, row in found[run.run_id].items():
            if not row.get("control"):
                scenarios.setdefault(scenario, {})[run.run_id] = row["status"]
    return runs, timelines


def history_page(root: str) -> str:
    runs, timelines = _timeline()
    columns = {name: {run.run_id for run in runs if settings(run) == name} for name in timelines}
    return _render("ui_history.html.j2", root=root, title="Verdict history", runs=runs, timelines=timelines, columns=columns)


def history_chart() -> bytes:
    """PNG: per run of the history page, how many scenarios passed, failed and were incomplete."""
    runs, timelines = _timeline()
    counted = [
        (run, [status for scenarios in timelines.values() for cells in scenarios.values() if (status := cells.get(run.run_id))])
        for run in runs
    ]
    return verdict_history([(run.run_id, time.gmtime(run.finished), statuses) for run, statuses in counted])


def served_report(run: RunDir, root: str) -> str:
    """The run's HTML report as the UI serves it: its Data Docs link, a path relative to the file on
    disk, points at the Data Docs route under `root` instead."""
    on_disk = os.path.relpath(data_docs_site() / "index.html", run.report.root)
    return run.report.index.read_text().replace(f'href="{on_disk}"', f'href="{root}/data-docs/index.html"')

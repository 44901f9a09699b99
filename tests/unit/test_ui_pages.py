"""The pages acklab serves inside Airflow, rendered from a real (SQLite) history: every link into a run
folder or the Data Docs names a file that is there; the file route never leaves its folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fastapi import HTTPException

from acklab.checker.gx_project import data_docs_site
from acklab.orchestration.ui import _file
from acklab.report.pages import dag_run_page, history_chart, history_page, latest_page, served_report
from acklab.store.history import RunRecord, record_run
from acklab.store.runs import RunDir


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    runs = tmp_path / "runs"
    monkeypatch.setenv("ACKLAB_RUNS", str(runs))
    monkeypatch.setenv("ACKLAB_EXPECTATIONS", str(tmp_path / "expectations"))
    monkeypatch.setenv("AIRFLOW_CONN_ACKLAB_HISTORY", f'{{"conn_type": "sqlite", "host": "{tmp_path / "h.sqlite"}"}}')
    for n, status in enumerate(("pass", "fail"), start=1):
        run_id = f"r{n}"
        for name in ("report/index.html", "audit/matrix.json"):
            (runs / run_id / name).parent.mkdir(parents=True, exist_ok=True)
            (runs / run_id / name).write_text("{}")
        rows = [{"scenario": "idempotent__leader-kill", "profile": "idempotent", "fault": "leader-kill", "guarantee": "exactly-once", "lost": n - 1}]
        record_run(RunRecord(run_id, float(n), status, "three-brokers", "4.3.1", "2.16.1", "kafka_delivery_matrix", "manual__1",
                             str(runs / run_id / "report/index.html")), rows, {"idempotent__leader-kill": status})
    data_docs_site().mkdir(parents=True)
    (data_docs_site() / "beliefs_r2.html").write_text("beliefs")
    return runs


def _linked_files(page: str, runs: Path) -> list[Path]:
    files = [runs / path for path in re.findall(r'href="/acklab/runs/([^"]+)"', page)]
    return files + [data_docs_site() / path for path in re.findall(r'href="/acklab/data-docs/([^"]+)"', page) if path != "index.html"]


def test_the_latest_page_shows_the_newest_run_of_each_setting_and_its_links_exist(history: Path) -> None:
    page = latest_page("/acklab")
    assert "run r2" in page and "run r1" not in page and 'class="fail">fail' in page
    linked = _linked_files(page, history)
    assert len(linked) == 3 and all(path.is_file() for path in linked), linked  # report, matrix.json, beliefs page


def test_a_dag_runs_page_and_the_history_show_every_run(history: Path) -> None:
    page = dag_run_page("/acklab", "kafka_delivery_matrix", "manual__1")
    assert "run r1" in page and "run r2" in page
    assert all(path.is_file() for path in _linked_files(page, history))
    timeline = history_page("/acklab")
    assert re.search(r'class="cell pass"[^>]*>P<.*class="cell fail"[^>]*>F<', timeline, re.S)
    assert history_chart().startswith(b"\x89PNG")


def test_the_served_report_links_the_data_docs_route(history: Path) -> None:
    run = RunDir(history / "r1")
    on_disk = os.path.relpath(data_docs_site() / "index.html", run.report.root)  # as build_report writes it
    run.report.index.write_text(f'<a href="{on_disk}">Great Expectations Data Docs</a> <a href="heatmap.png">x</a>')
    assert served_report(run, "/acklab") == '<a href="/acklab/data-docs/index.html">Great Expectations Data Docs</a> <a href="heatmap.png">x</a>'


def test_the_file_route_serves_report_files_inside_their_folder_only(history: Path) -> None:
    assert Path(_file(history / "r1", "report/index.html").path) == (history / "r1" / "report" / "index.html").resolve()
    (history / "secret.txt").write_text("no")
    for path in ("../secret.txt", "../r2/report/index.html", "report/missing.html", "../../h.sqlite"):
        with pytest.raises(HTTPException):
            _file(history / "r1", path)

"""acklab inside the Airflow UI: an Airflow plugin (entry point `airflow.plugins`) serving, from the
api-server under `/acklab` and only to users Airflow authenticated (its JWT, as the UI's cookie or a
bearer token), the latest matrix, the verdict history and its chart, each DAG run's verdicts, the
runs' HTML reports, the known-bugs page and the GX Data Docs; views in the UI's navigation (Browse)
and a tab on every DAG run."""

from __future__ import annotations

from pathlib import Path

from airflow.api_fastapi.core_api.security import requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

PREFIX = "/acklab"
SERVED = {".html", ".png", ".jpg", ".gif", ".svg", ".ico", ".json", ".css", ".js", ".woff", ".woff2", ".ttf"}  # what report folders may serve

app = FastAPI(title="acklab reports", dependencies=[Depends(requires_authenticated())])


def _root(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def _file(folder: Path, path: str) -> FileResponse:
    """`folder/path` if it is a report file inside `folder`; 404 otherwise (no way out of the folder)."""
    found = (folder / path).resolve()
    if not found.is_relative_to(folder.resolve()) or found.suffix not in SERVED or not found.is_file():
        raise HTTPException(404, f"no such report file: {path}")
    return FileResponse(found)


@app.get("/", response_class=HTMLResponse)
def latest(request: Request) -> str:
    from acklab.report.pages import latest_page

    return latest_page(_root(request))


@app.get("/history", response_class=HTMLResponse)
def history(request: Request) -> str:
    from acklab.report.pages import history_page

    return history_page(_root(request))


@app.get("/history.png")
def history_png() -> Response:
    from acklab.report.pages import history_chart

    return Response(history_chart(), media_type="image/png")


@app.get("/dag-runs/{dag_id}/{dag_run_id}", response_class=HTMLResponse)
def dag_run(request: Request, dag_id: str, dag_run_id: str) -> str:
    from acklab.report.pages import dag_run_page

    return dag_run_page(_root(request), dag_id, dag_run_id)


@app.get("/runs/{run_id}/{path:path}")
def run_file(request: Request, run_id: str, path: str) -> Response:
    from acklab.base.paths import runs_dir
    from acklab.report.pages import served_report
    from acklab.store.runs import RunDir

    if "/" in run_id or run_id in {"", ".", ".."}:
        raise HTTPException(404, f"no such run: {run_id}")
    run = RunDir(runs_dir() / run_id)
    if path == run.report.index.relative_to(run.root).as_posix() and run.report.index.is_file():
        return HTMLResponse(served_report(run, _root(request)))
    return _file(run.root, path)


@app.get("/known-bugs/{path:path}")
def known_bugs(path: str) -> FileResponse:
    from acklab.store.runs import known_bugs_dir

    return _file(known_bugs_dir(), path)


@app.get("/data-docs/{path:path}")
def data_docs(path: str) -> FileResponse:
    from acklab.checker.gx_project import data_docs_site

    return _file(data_docs_site(), path)


class AcklabPlugin(AirflowPlugin):
    name = "acklab"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "acklab reports"}]
    external_views = [
        {"name": "Delivery matrix", "href": f"{PREFIX}/", "url_route": "acklab", "destination": "nav", "category": "browse"},
        {"name": "Verdict history", "href": f"{PREFIX}/history", "url_route": "acklab-history", "destination": "nav", "category": "browse"},
        {"name": "acklab verdicts", "href": f"{PREFIX}/dag-runs/{{DAG_ID}}/{{RUN_ID}}", "url_route": "acklab-run", "destination": "dag_run"},
    ]

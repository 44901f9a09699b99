"""acklab's pages inside the Airflow UI, in a real browser (headless Chromium) on the session's stack
(PostgreSQL, the history in it): the Browse views show the latest matrix and the verdict history
with its chart, a DAG run's tab shows its verdicts, the report, its heatmap and the Data Docs open
from there; nothing is served to anyone Airflow did not authenticate."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import FrameLocator, Page, expect

from acklab.services.airflow_stack import StackState

from ..airflow_rest import AirflowRest
from .conftest import SMOKE

pytestmark = [pytest.mark.integration, pytest.mark.browser]

SMALL = {"topology": "single-broker", "profiles": ["idempotent"], "faults": ["none"], "messages": 5000, "rate": 5000}
PAGES = ("/acklab/", "/acklab/history", "/acklab/history.png", "/acklab/dag-runs/a/b", "/acklab/runs/r/report/index.html",
         "/acklab/known-bugs/index.html", "/acklab/data-docs/index.html")


@pytest.fixture(scope="module")
def finished_run(airflow_rest: AirflowRest) -> dict:
    """A successful smoke DAG run: the latest one, else one triggered now."""
    airflow_rest.wait_for_dag(SMOKE)
    done = [run for run in airflow_rest.runs(SMOKE) if run["state"] == "success"]
    if done:
        return done[-1]
    airflow_rest.set_paused(SMOKE, False)
    response = airflow_rest.trigger(SMOKE, SMALL)
    assert response.status_code == 200, response.text
    run = airflow_rest.wait_for_run(SMOKE, response.json()["dag_run_id"], 600)
    assert run["state"] == "success", airflow_rest.failure_report(SMOKE, run["dag_run_id"])
    return run


def test_anonymous_is_refused_and_a_token_is_served(airflow_stack: StackState, airflow_rest: AirflowRest) -> None:
    for path in PAGES:
        assert httpx.get(f"{airflow_stack.url}{path}", timeout=30).status_code == 401, path
        forged = httpx.get(f"{airflow_stack.url}{path}", cookies={"_token": "forged"}, headers={"Authorization": "Bearer forged"}, timeout=30)
        assert forged.status_code in (401, 403), path
    token = airflow_rest.client.headers["Authorization"]
    served = httpx.get(f"{airflow_stack.url}/acklab/", headers={"Authorization": token}, timeout=30)
    assert served.status_code == 200 and "Latest delivery matrix" in served.text


def test_the_report_route_refuses_paths_out_of_its_run_folder(airflow_stack: StackState, airflow_rest: AirflowRest, isolated_run_store: Path) -> None:
    """Traversal reaches the route serving run files (its refusal names the path it was given) and is
    refused by the route's own checks, although the file exists and has a suffix the route serves:
    `..`, `%2e%2e`, an absolute path, and `..` as the run id; anonymous, the same requests are 401."""
    outside = isolated_run_store.parent / "outside-the-runs.json"  # what a way out of runs/r would reach
    outside.write_text("{}")
    token = {"Authorization": airflow_rest.client.headers["Authorization"]}
    probes = {
        "/acklab/runs/r/..%2F..%2Foutside-the-runs.json": "no such report file: ../../outside-the-runs.json",
        "/acklab/runs/r/%2e%2e%2F%2e%2e%2Foutside-the-runs.json": "no such report file: ../../outside-the-runs.json",
        f"/acklab/runs/r/{quote(str(outside), safe='')}": f"no such report file: {outside}",
        "/acklab/runs/%2e%2e/outside-the-runs.json": "no such run: ..",
    }
    try:
        for path, refusal in probes.items():
            assert httpx.get(f"{airflow_stack.url}{path}", timeout=30).status_code == 401, path
            answer = httpx.get(f"{airflow_stack.url}{path}", headers=token, timeout=30)
            assert (answer.status_code, answer.json()) == (404, {"detail": refusal}), (path, answer.text)
        missing_route = httpx.get(f"{airflow_stack.url}/acklab/no-such-route", headers=token, timeout=30)
        assert (missing_route.status_code, missing_route.json()) == (404, {"detail": "Not Found"})  # what the probes must not be
    finally:
        outside.unlink()


def _plugin_frame(page: Page) -> FrameLocator:
    return page.frame_locator("iframe")


def test_browse_views_show_the_latest_matrix_and_the_history(page: Page, airflow_stack: StackState, finished_run: dict, screenshots: Path) -> None:
    page.goto(f"{airflow_stack.url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Delivery matrix").click()
    frame = _plugin_frame(page)
    expect(frame.get_by_role("heading", name="Latest delivery matrix")).to_be_visible()
    expect(frame.get_by_text(f"DAG {SMOKE}, run {finished_run['dag_run_id']}").first).to_be_visible()
    expect(frame.locator("td.pass").first).to_be_visible()
    page.screenshot(path=screenshots / "01-latest.png")

    frame.get_by_role("link", name="History").click()
    expect(frame.get_by_role("heading", name="Verdict history")).to_be_visible()
    chart = frame.get_by_alt_text("verdicts per run")
    expect(chart).to_be_visible()
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0")
    expect(frame.locator("td.cell.pass").first).to_be_visible()
    page.screenshot(path=screenshots / "02-history.png")


def test_a_dag_run_tab_shows_its_verdicts_and_its_links_work(
    page: Page, airflow_stack: StackState, finished_run: dict, screenshots: Path
) -> None:
    page.goto(f"{airflow_stack.url}/dags/{SMOKE}/runs/{finished_run['dag_run_id']}")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=screenshots / "03-dag-run-page.png")
    page.get_by_text("acklab verdicts", exact=True).click()  # the tab acklab adds to every DAG run
    frame = _plugin_frame(page)
    expect(frame.get_by_role("heading", name=f"{SMOKE} · {finished_run['dag_run_id']}")).to_be_visible()
    scenarios = [s for s in finished_run["conf"].get("profiles", [])]
    for profile in scenarios:
        expect(frame.locator("tr", has_text=f"{profile}__").locator("td.pass")).to_be_visible()
    expect(frame.get_by_text("negative-control__planted-loss (negative control)")).to_be_visible()
    page.screenshot(path=screenshots / "04-dag-run-tab.png")

    frame.get_by_role("link", name="full report").first.click()
    expect(frame.get_by_role("heading", name="acklab run")).to_be_visible()
    heatmap = frame.get_by_alt_text("verdict heatmap")
    expect(heatmap).to_be_visible()
    assert heatmap.evaluate("img => img.complete && img.naturalWidth > 0")
    page.screenshot(path=screenshots / "05-report.png")
    frame.get_by_role("link", name="Great Expectations Data Docs").click()  # the report's own link, inside the UI
    expect(frame.get_by_text("Expectation Suites").first).to_be_visible()

    page.goto(f"{airflow_stack.url}/plugin/acklab")
    _plugin_frame(page).get_by_role("link", name="Data Docs").click()
    expect(_plugin_frame(page).get_by_text("Expectation Suites").first).to_be_visible()
    page.screenshot(path=screenshots / "06-data-docs.png")

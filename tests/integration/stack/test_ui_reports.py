"""acklab's pages inside the Airflow UI, in a real browser (headless Chromium) on the session's stack
(PostgreSQL, the history in it): the Browse views show the latest matrix and the verdict history
with its chart, a DAG run's tab shows its verdicts, the report, its heatmap and the Data Docs open
from there; nothing is served to anyone Airflow did not authenticate."""

from __future__ import annotations

from pathlib import Path

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
    outside = httpx.get(f"{airflow_stack.url}/acklab/runs/r/..%2F..%2Fetc%2Fpasswd", headers={"Authorization": token}, timeout=30)
    assert outside.status_code == 404


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

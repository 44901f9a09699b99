"""The Airflow stack the scheduler and browser tests share: started once for this package and
stopped when its last test is done, so it does not idle under the other integration tests; and a
logged-in headless Chromium (Debian's, driven by Playwright) per browser module."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from acklab.services import airflow_stack as stack
from acklab.services.airflow_stack import StackState

from ..airflow_rest import AirflowRest
from ..helpers import stop_stack_and_check

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@pytest.fixture(scope="package")
def airflow_stack(acklab_env: dict[str, str], artifacts_dir: Path) -> Iterator[StackState]:
    """The stack as teams deploy it: api-server, scheduler and dag-processor (LocalExecutor) on a
    PostgreSQL started for it, all on 127.0.0.1, with this session's run store and GX project.
    Stopped exactly at the end (its logs kept as artifacts); nothing it started may survive."""
    home = Path(tempfile.mkdtemp(prefix="acklab-stack-"))  # under /tmp: PostgreSQL's user must reach it
    home.chmod(0o755)
    state = stack.start(home, use_postgres=True, base_env=acklab_env)
    try:
        yield state
    finally:
        stop_stack_and_check(home, state, artifacts_dir / "airflow-stack")


@pytest.fixture(scope="package")
def airflow_rest(airflow_stack: StackState) -> AirflowRest:
    return AirflowRest(airflow_stack.url, airflow_stack.user, airflow_stack.password)


SMOKE = "kafka_delivery_smoke"
# Headless Chromium as root, on a machine without network: no sandbox, nothing phoning home.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-quic",
]


def _chromium_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]


@pytest.fixture(scope="module")
def screenshots(artifacts_dir: Path, request: pytest.FixtureRequest) -> Path:
    """The module's screenshot folder (test_trigger_form: trigger-form/), emptied first."""
    folder = artifacts_dir / request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def page(airflow_stack: StackState, airflow_rest: AirflowRest) -> Iterator[Page]:
    """A logged-in page of the stack's UI (requests off the loopback refused at once); the browser is gone afterwards."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no chromium on PATH (make browser-deps)")
    airflow_rest.wait_for_dag(SMOKE)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        # Only loopback is ours to reach: GX's Data Docs load their CSS and scripts from CDNs, and a
        # page waiting on those blocked its own rendering past the assertion's timeout.
        page.route(lambda url: urlparse(url).hostname not in LOOPBACK, lambda route: route.abort())
        page.goto(f"{airflow_stack.url}/")
        page.locator("input[name=username]").fill(airflow_stack.user)
        page.locator("input[name=password]").fill(airflow_stack.password)
        page.locator("button[type=submit]").click()
        expect(page.get_by_role("heading", name="Welcome")).to_be_visible()
        yield page
        browser.close()
    assert _chromium_children() == [], "Chromium processes left behind"

"""The smoke DAG's trigger form in a real browser (Debian's Chromium, headless, driven by Playwright)
on the session's Airflow stack: every param shows its description, enums are pick lists, a bad
value is refused with the schema's message, a good one starts a run that passes. Screenshots are
kept in the test artifacts folder (`ACKLAB_TEST_ARTIFACTS`, default `test-artifacts/`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from acklab.orchestration.params import run_params_schema
from acklab.services.airflow_stack import StackState

from ..airflow_rest import AirflowRest
from ..helpers import assert_nothing_left
from .conftest import SMOKE

pytestmark = [pytest.mark.integration, pytest.mark.browser]

GOOD = {"topology": "single-broker", "profiles": ["idempotent"], "faults": ["none"], "messages": 5000, "rate": 5000}


def _open_trigger_form(page: Page, url: str) -> Locator:
    page.goto(f"{url}/dags/{SMOKE}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text("Run Parameters")).to_be_visible()
    return dialog


def _field(dialog: Locator, name: str) -> Locator:
    """The form row of param `name`: its label, input and description."""
    label = dialog.locator("label").filter(has_text=re.compile(rf"^{name}\s*\*?$"))
    return label.locator("xpath=ancestor::div[@data-scope='field' and @data-part='root'][1]")


def _pick_list(dialog: Locator, name: str) -> tuple[list[str], list[str]]:
    """(chosen values of a multi-select, values offered) of a pick-list param, read by opening it."""
    row = _field(dialog, name)
    chosen = [str(chip.get_attribute("aria-label")).removeprefix("Remove ") for chip in row.locator("[aria-label^='Remove ']").all()]
    row.get_by_role("combobox").click()
    expect(dialog.page.get_by_role("option").first).to_be_visible()
    offered = [option.inner_text() for option in dialog.page.get_by_role("option").all()]
    _close_menu(dialog)
    return chosen, offered


def _close_menu(dialog: Locator) -> None:
    """Close an open pick list by clicking the dialog's title (Escape would close the dialog)."""
    dialog.get_by_role("heading", name=f"Trigger Dag - {SMOKE}").click()
    expect(dialog.page.get_by_role("option")).to_have_count(0)


def test_form_describes_every_param_offers_enums_and_refuses_a_bad_value(
    page: Page, airflow_stack: StackState, airflow_rest: AirflowRest, screenshots: Path
) -> None:
    dialog = _open_trigger_form(page, airflow_stack.url)
    schema = run_params_schema()
    for name, field in schema.items():
        expect(_field(dialog, name)).to_contain_text(field["description"])
    dialog.screenshot(path=screenshots / "01-form.png")

    for name in ("topology", "backend"):
        _, offered = _pick_list(dialog, name)
        assert sorted(offered) == sorted(schema[name]["enum"]), (name, offered)
    for name in ("profiles", "faults"):
        chosen, offered = _pick_list(dialog, name)
        assert chosen and set(chosen).isdisjoint(offered), (name, chosen, offered)
        assert sorted(chosen + offered) == sorted(schema[name]["examples"]), (name, chosen, offered)
    page.screenshot(path=screenshots / "02-enums.png")

    runs_before = len(airflow_rest.runs(SMOKE))
    _field(dialog, "kafka_version").locator("input").fill("2.8.0")
    dialog.get_by_role("button", name="Trigger").click()
    expect(dialog.get_by_text("Invalid input for param kafka_version")).to_be_visible()
    expect(page.get_by_text("Failed to Trigger Dag").first).to_be_visible()  # the toast may render twice
    page.screenshot(path=screenshots / "03-bad-value.png")
    assert len(airflow_rest.runs(SMOKE)) == runs_before


def test_form_starts_a_run_with_the_values_entered(
    page: Page, airflow_stack: StackState, airflow_rest: AirflowRest, isolated_run_store: Path, screenshots: Path
) -> None:
    before = {run["dag_run_id"] for run in airflow_rest.runs(SMOKE)}
    runs_before = set(isolated_run_store.iterdir())
    dialog = _open_trigger_form(page, airflow_stack.url)
    _field(dialog, "topology").get_by_role("combobox").click()
    page.get_by_role("option", name=GOOD["topology"], exact=True).click()
    _field(dialog, "profiles").get_by_label("Remove leader-ack").click()
    faults = _field(dialog, "faults")
    faults.get_by_label("Remove leader-kill").click()
    faults.get_by_role("combobox").click()
    page.get_by_role("option", name="none", exact=True).click()
    _close_menu(dialog)
    for name in ("messages", "rate"):
        _field(dialog, name).locator("input").fill(str(GOOD[name]))
    dialog.screenshot(path=screenshots / "04-good-values.png")
    dialog.get_by_role("button", name="Trigger").click()
    expect(page.get_by_text("Dag Run Triggered").first).to_be_visible()
    page.screenshot(path=screenshots / "05-triggered.png")

    (run,) = [run for run in airflow_rest.runs(SMOKE) if run["dag_run_id"] not in before]
    assert {key: run["conf"][key] for key in GOOD} == GOOD
    finished = airflow_rest.wait_for_run(SMOKE, run["dag_run_id"], 600)
    assert finished["state"] == "success", airflow_rest.failure_report(SMOKE, run["dag_run_id"])
    page.reload()
    expect(page.get_by_text("success").first).to_be_visible()
    page.screenshot(path=screenshots / "06-run-passed.png")
    (run_dir,) = [p for p in set(isolated_run_store.iterdir()) - runs_before if (p / "manifest.json").exists()]
    assert json.loads((run_dir / "result.json").read_text())["scenarios"] == {"idempotent__none": "pass"}
    assert_nothing_left(run_dir / "cluster")

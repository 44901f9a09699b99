"""Every catalog fault that no other real-cluster test runs, once each on one 3-broker cluster
(RF=3, min.insync.replicas=2) under the idempotent producer: its effect check must see it take
effect on real brokers, the Spark audit must account for every planned message, and the GX
verdict must pass (the idempotent producer keeps its guarantee under each of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.checker.gx_validation import validate_matrix
from acklab.checker.verdict import Verdict
from acklab.cluster import links
from acklab.nemesis.faults import FAULTS, PLANTING
from acklab.plan.planner import make_plan
from acklab.store.contract import IDENTITIES

from .helpers import run_audited

pytestmark = pytest.mark.integration

PROCESS_AND_PROXY = ["leader-restart", "leader-pause", "follower-kill", "follower-restart", "controller-kill", "rolling-restart", "client-partition", "lose-then-reject"]
LINKS = ["node-isolate", "split", "one-way-cut", "lossy-link"]
FAULT_NAMES = PROCESS_AND_PROXY + LINKS


def _cannot_run(fault: str) -> str | None:
    """Why `fault` cannot run on this host, or None. A fault that cannot run is skipped with this
    reason, which fails under CI=true (tests/conftest.py); it never leaves the parametrisation."""
    return links.unavailable() if fault in LINKS else None


Audited = tuple[dict[str, dict], dict[str, dict], Verdict]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """One group per fault on one cluster, one Spark audit, then the GX verdict."""
    run = run_audited([
        make_plan({
            "profiles": ["idempotent"], "faults": [fault], "messages": 15_000, "rate": 1500, "fault_at_s": 1.0, "fault_duration_s": 8,
            "negative_control": False,  # the negative controls are test_negative_control's subject
        })
        for fault in FAULT_NAMES
        if _cannot_run(fault) is None
    ])
    verdict = validate_matrix(run, Path(tmp_path_factory.mktemp("expectations")), run.run_id)
    manifest = {s.scenario: s.model_dump() for s in run.read_manifest().scenarios}
    return manifest, {row["scenario"]: row for row in run.read_matrix()}, verdict


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_the_fault_takes_effect_and_the_idempotent_producer_keeps_its_guarantee(request: pytest.FixtureRequest, fault: str) -> None:
    if (why := _cannot_run(fault)) is not None:
        pytest.skip(f"{fault} cannot run on this host: {why}")
    manifest, rows, verdict = request.getfixturevalue("audited")
    scenario = f"idempotent__{fault}"
    (event,) = manifest[scenario]["fault_timeline"]
    assert event["effective"], event
    row = rows[scenario]
    assert row["sent"] == row["planned"] == 15_000, row
    assert (row["lost"], row["duplicates"], row["unknown"]) == (0, 0, 0), row
    for total, parts in IDENTITIES:
        assert row[total] == sum(row[part] for part in parts), (total, parts, row)
    (judged,) = [s for s in verdict.scenarios if s.scenario == scenario]
    assert judged.status == "pass", judged.summary_line()


def test_the_catalog_is_covered() -> None:
    """Each fault runs on a real cluster in some test of `make test`: here, or in the files named."""
    elsewhere = {
        "leader-kill", "replicas-down", "ack-loss", "request-loss", "latency",  # test_faults, test_workload
        "error-inject", "error-after-append", "request-hold", "stall-write", "leader-isolate",  # test_proxy_faults, test_link_faults
        "withhold-replay",  # test_bug_library
        *PLANTING,  # test_negative_control (and every run's negative controls)
        "processor-kill", "zombie", "txn-coordinator-kill", "group-coordinator-kill",  # test_pipeline_run
    }
    assert set(FAULTS) - {"none"} == elsewhere | set(PROCESS_AND_PROXY) | set(LINKS)

"""`acklab explore` on a real cluster, as a user runs it: a space narrowed to one fault on
confluent-kafka 2.2.0, so that its first trial goes red; the finding confirmed alone with the
negative controls (each caught), shrunk, written as a maintainer-ready report beside its repro
folder, and the trials the seed chooses given what each did. In the `versions` family (an older client)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.plan.explore import ExploreSpace, Search

pytestmark = [pytest.mark.integration, pytest.mark.versions]
ACKLAB = str(Path(sys.executable).parent / "acklab")


def test_explore_confirms_shrinks_and_reports_what_it_finds(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = ["--budget-minutes", "1", "--seed", "1", "--client-version", "2.2.0", "--profile", "idempotent", "--fault", "lose-then-reject"]
    done = subprocess.run([ACKLAB, "explore", *args, "--shrink-runs", "1"], capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "ACKLAB_RUNS": str(runs)})
    assert done.returncode == 1, done.stderr[-3000:] + done.stdout[-2000:]
    (summary_file,) = runs.glob("explorations/*/exploration.json")
    summary = json.loads(summary_file.read_text())
    assert summary["status"] == "done" and summary["seed"] == 1 and summary["trials"] >= 1
    space = ExploreSpace(clients=("librdkafka:2.2.0",), profiles=("idempotent",), faults=("lose-then-reject",))
    search, chosen = Search(space, 1, 3, [1, 2, 3], False), 0
    for trial in summary["trial_log"]:  # the seed's trials given what each did, in order (the refused ones skipped)
        while True:
            params, varies = search.next()
            chosen += 1
            assert chosen <= summary["trials"] + summary["refused_draws"], f"trial {trial['number']} is not the seed's"
            if json.loads(json.dumps(params)) == trial["params"]:
                break
        assert varies == trial["varies"]
        search.observe(trial["number"], params, trial["reached"])
    for trial in summary["trial_log"]:  # a trial's run has no negative control: it proves nothing by passing
        manifest = json.loads((runs / trial["run_id"] / "manifest.json").read_text())
        assert not any(entry["control"] for entry in manifest["scenarios"])
    finding = summary["findings"][0]
    assert finding["confirmed"] and finding["trial"] == 1 and finding["scenario"] in summary["trial_log"][0]["red"], finding
    repro = Path(finding["repro"])
    params = json.loads((repro / "params.json").read_text())
    assert params["negative_control"] is True and params["client"] == "librdkafka:2.2.0"
    red_runs = [p.parent for p in runs.glob("2*/result.json") if json.loads(p.read_text())["status"] == "fail"]
    confirming = [r for r in red_runs if any(e["control"] for e in json.loads((r / "manifest.json").read_text())["scenarios"])]
    assert confirming, "the confirming run had its negative controls, each caught (else its status is invalid)"
    report = Path(finding["report"]).read_text()
    for part in ("# librdkafka 2.2.0 on Kafka", "## Versions", "## Producer properties", "## Load and fault schedule", "lose-then-reject",
                 "## Expected and observed", "## Evidence excerpts", "## Reproduce", str(repro / "run.sh")):
        assert part in report, part
    assert ("Known bug" in report) == bool(finding["known"])
    assert f"finding 1 (trial 1, {finding['scenario']})" in done.stdout and "confirmed finding(s)" in done.stdout

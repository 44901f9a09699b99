"""`acklab` without Airflow: same scenario code, JSON output, clear errors on bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from junitparser import Error, JUnitXml

from acklab.orchestration.cli.common import ExitCode

from .helpers import BIN, json_rows

pytestmark = pytest.mark.integration


def acklab(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "acklab"), *args], env=env, capture_output=True, text=True, timeout=900)


def test_cli_run_prints_matrix_json(acklab_env: dict[str, str]) -> None:
    result = acklab(
        acklab_env, "run", "--topology", "single-broker", "--profile", "at-least-once", "--fault", "none",
        "--messages", "3000", "--rate", "0", "--json",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = json_rows(result.stdout)
    assert row["scenario"] == "at-least-once__none"
    assert row["guarantee"] == "leader-durable"  # RF=1, min.insync=1: no replication to rely on
    assert (row["sent"], row["acked"], row["delivered"], row["lost"], row["duplicates"]) == (3000, 3000, 3000, 0, 0)
    assert "report: " in result.stderr.splitlines()[-1]


def test_cli_run_is_quiet_and_prints_the_table_the_control_and_the_status(acklab_env: dict[str, str]) -> None:
    """One scenario prints at most 60 lines in all at 120 columns; the libraries' logging goes to the run's run.log."""
    result = acklab({**acklab_env, "COLUMNS": "120"}, "run", "--profile", "leader-ack", "--fault", "none", "--messages", "2000", "--rate", "1000")
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    assert len(result.stdout.splitlines()) + len(result.stderr.splitlines()) <= 60, result.stderr + result.stdout
    run_log = Path(result.stdout.split("html report: ")[1].split()[0]).parent.parent / "run.log"
    assert "great_expectations" in run_log.read_text() and "great_expectations" not in result.stderr
    verdicts, lines = result.stderr.splitlines(), result.stdout.splitlines()
    caught = [n for n, line in enumerate(verdicts) if line.startswith("negative control caught: the proxy swallowed ")]
    passed = [n for n, line in enumerate(verdicts) if line.startswith("PASS leader-ack__none ")]
    assert len(caught) == len(passed) == 1 and caught[0] < passed[0], result.stderr  # said once, before the verdicts
    assert "negative control" not in result.stdout.split("delivery matrix")[1] and "status: pass" in lines
    (row,) = [line for line in lines if line.lstrip("│┃ ").startswith("negative-control__planted-loss")]  # the matrix table
    assert "caught" in row and "leader-ack__none" in result.stdout, row


def test_an_incomplete_run_has_its_own_exit_code_and_reads_as_an_error_in_junit(acklab_env: dict[str, str], tmp_path: Path) -> None:
    """A duplicate planted into an idempotent producer's writes: the broker would recognise the copy,
    so the proxy plants none and the row says nothing (incomplete, never a pass): exit 3, status
    incomplete in the results, an `<error>` in the JUnit file (a skip would read green)."""
    junit = tmp_path / "out.xml"
    result = acklab(
        acklab_env, "run", "--profile", "idempotent", "--fault", "planted-duplicate", "--messages", "2000", "--rate", "1000",
        "--fault-at-s", "0.5", "--json", "--junit", str(junit),
    )
    assert result.returncode == ExitCode.INCOMPLETE == 3, result.stderr[-3000:]
    document = json.loads(result.stdout)
    (scenario,) = document["scenarios"]
    assert document["status"] == scenario["verdict"] == "incomplete" and document["failing"] == ["idempotent__planted-duplicate"]
    (suite,) = JUnitXml.fromfile(str(junit))
    (error,) = next(case for case in suite if case.name == "idempotent__planted-duplicate").result
    assert isinstance(error, Error) and suite.errors == 1 and suite.failures == 0


def test_cli_rejects_bad_input_before_starting(acklab_env: dict[str, str], tmp_path: Path) -> None:
    result = acklab(acklab_env, "run", "--fault", "meteor")
    assert result.returncode == 2
    assert "unknown fault 'meteor'; valid: none, leader-kill, leader-restart" in result.stderr
    result = acklab(acklab_env, "run", "--fault", "none", "--junit", str(tmp_path / "no-such-folder" / "junit.xml"))
    assert result.returncode == 2 and "--junit" in result.stderr and "does not exist" in result.stderr, result.stderr
    kept = tmp_path / "earlier.xml"
    kept.write_text("<testsuites/>")
    result = acklab(acklab_env, "run", "--fault", "meteor", "--junit", str(kept))
    assert result.returncode == 2 and kept.read_text() == "<testsuites/>"  # bad input loses nothing
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbrokers: 1\nreplication_factor: 1\nmin_insync_replicas: 2\n")
    result = acklab(acklab_env, "check-topology", str(bad))
    assert result.returncode == 2
    assert "min_insync_replicas (2) > replication_factor (1)" in result.stderr

"""A user's own producer: a profiles file with a raw librdkafka profile through the CLI, and raw
`custom_profiles` through the DAG's params; the producer config recorded is the user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .helpers import dags_test, json_rows
from .test_cli import acklab

pytestmark = pytest.mark.integration
RAW = {"acks": "all", "enable.idempotence": "true", "linger.ms": 7, "compression.type": "lz4"}


def _recorded(run_dir: Path) -> dict:
    (entry,) = [e for e in json.loads((run_dir / "manifest.json").read_text())["scenarios"] if not e["control"]]
    return entry


def test_a_profiles_file_runs_through_the_cli(acklab_env: dict[str, str], tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(yaml.safe_dump({"ours": {"librdkafka": RAW, "description": "our service's producer"}}))
    result = acklab(
        acklab_env, "run", "--topology", "single-broker", "--profiles-file", str(profiles), "--profile", "ours",
        "--fault", "none", "--messages", "3000", "--rate", "1000", "--json",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = json_rows(result.stdout)
    assert (row["scenario"], row["guarantee"], row["acked"], row["lost"]) == ("ours__none", "leader-durable", 3000, 0)
    manifests = (p / "manifest.json" for p in Path(acklab_env["ACKLAB_RUNS"]).iterdir())
    (run_dir,) = (m.parent for m in manifests if m.exists() and "ours__none" in m.read_text())
    entry = _recorded(run_dir)
    assert {k: entry["producer_config"][k] for k in ("linger.ms", "compression.type", "enable.idempotence")} == {
        "linger.ms": 7, "compression.type": "lz4", "enable.idempotence": True,
    }


@pytest.mark.slow  # 110 s; the CLI path of user profiles stays in `make test`
def test_raw_custom_profiles_run_through_the_dag(acklab_env: dict[str, str], isolated_run_store: Path) -> None:
    before = set(isolated_run_store.iterdir())
    conf = {
        "custom_profiles": {"ours": {"librdkafka": RAW}}, "profiles": ["ours"], "faults": ["leader-kill"],
        "messages": 30000, "rate": 3000, "fault_at_s": 1.0,
    }
    result = dags_test(acklab_env, conf)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    (run_dir,) = {p for p in set(isolated_run_store.iterdir()) - before if p.is_dir() and (p / "result.json").exists()}
    assert json.loads((run_dir / "result.json").read_text())["scenarios"] == {"ours__leader-kill": "pass"}
    entry = _recorded(run_dir)
    assert entry["guarantee"] == "exactly-once" and entry["producer_config"]["compression.type"] == "lz4"

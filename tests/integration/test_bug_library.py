"""The documented-bug presets on real clusters, through the CLI as a user runs them: librdkafka #4953,
open, red on the newest confluent-kafka and made into an `acklab repro` folder; KAFKA-14417's fixed side
on the newest kafka-clients. The presets that need other Kafka or client versions (KAFKA-14402 red on
Kafka 3.5.2 and green on 3.6.2, KAFKA-14417, KAFKA-19012, librdkafka #4736 and #4849) are in the
`versions` family."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.workload import java_client, librdkafka

from .helpers import json_pair_rows, json_rows

pytestmark = pytest.mark.integration


def _checked(rows: list[dict]) -> list[dict]:
    """A run's matrix rows (or manifest entries) but its negative control's."""
    return [row for row in rows if not row["control"]]
ACKLAB = str(Path(sys.executable).parent / "acklab")


def acklab(runs: Path, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ACKLAB, *args], capture_output=True, text=True, timeout=timeout_s, env={**os.environ, "ACKLAB_RUNS": str(runs)})


@pytest.mark.versions  # two older Kafka versions
def test_kafka_14402_leaves_a_hanging_transaction_on_3_5_2_not_on_3_6_2_and_becomes_a_repro_folder(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = acklab(runs, "run", "--preset", "kafka-14402", "--kafka-version", "3.5.2", "--kafka-version", "3.6.2", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {label.split(" /")[0]: rows[0] for label, rows in json_pair_rows(done.stdout).items()}
    before, after = rows["Kafka 3.5.2"], rows["Kafka 3.6.2"]
    assert (before["hanging_partitions"], after["hanging_partitions"]) == (1, 0), rows
    assert "producer id" in before["hanging_detail"] and "open since offset" in before["hanging_detail"], before["hanging_detail"]
    assert before["evidence_complete"] and after["evidence_complete"] and before["fault_effective"] and after["fault_effective"]
    assert "CLAIM REPRODUCED" in done.stderr and "CLAIM NOT REPRODUCED" not in done.stderr, done.stderr[-3000:]
    entries = {}
    for result in runs.glob("2*/result.json"):
        manifest = json.loads((result.parent / "manifest.json").read_text())
        entries[manifest["topology"]["kafka_version"]] = (result.parent, _checked(manifest["scenarios"])[0])
    for version, appended in (("3.5.2", True), ("3.6.2", False)):
        (withheld,) = [w for record in entries[version][1]["fault_timeline"] for w in record["withheld"] if not w["queued"]]
        assert withheld["transactional_id"].endswith("txn-rto3s__withhold-replay-p0") and withheld["batches"] and withheld["released_at"] > withheld["held_at"]
        assert (": NONE" in withheld["answer"]) is appended, withheld  # 3.6.2 refuses the stale write

    red_run, entry = entries["3.5.2"]
    done = acklab(runs, "repro", red_run.name, entry["scenario"], "--shrink-runs", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (runs / "repros").iterdir()
    names = {path.name for path in folder.iterdir()}
    assert {"README.md", "run.sh", "params.json", "producer.properties", "server.properties", "schedule.json", "versions.json",
            "records.txt", "client.log", "broker.log", "verdict.txt", "topology.yaml"} <= names
    assert "runs: 1 (1 to confirm it alone, 0 shrinking)" in done.stdout
    assert "hanging_partitions == 0" in (folder / "verdict.txt").read_text()
    assert json.loads((folder / "versions.json").read_text())["kafka"] == "3.5.2"
    assert "transactional.id=app" in (folder / "producer.properties").read_text()
    assert json.loads((folder / "params.json").read_text())["client"] == "java:4.3.1"


def test_librdkafka_4953_an_epoch_bump_duplicates_an_idempotent_producers_records_on_the_newest_librdkafka(tmp_path: Path) -> None:
    """An open bug, red on the locked (newest) confluent-kafka: two overlapping faults, an appended request's
    answer lost on one leader while another leader answers a later request OUT_OF_ORDER_SEQUENCE_NUMBER;
    the idempotent producer bumps its epoch and stores the unanswered records a second time."""
    done = acklab(tmp_path / "runs", "run", "--preset", "librdkafka-4953", "--client", "librdkafka", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    (row,) = json_rows(done.stdout)
    assert row["duplicates"] > 0 and row["lost"] == 0 and row["acked"] == row["planned"], row
    assert row["fault_effective"] and row["evidence_complete"], row
    (run,) = (tmp_path / "runs").glob("2*/manifest.json")
    (entry,) = _checked(json.loads(run.read_text())["scenarios"])
    held, rejected = entry["fault_timeline"]
    assert (held["fault"], rejected["fault"]) == ("ack-loss", "lose-then-reject") and held["target"] != rejected["target"], entry["fault_timeline"]
    assert held["started"] < rejected["started"] < held["ended"], entry["fault_timeline"]  # the two faults at once
    assert held["counts"]["dropped_responses"] >= 1 and rejected["counts"]["injected_errors"] == 1
    assert "CLAIM REPRODUCED" in done.stderr and "CLAIM NOT REPRODUCED" not in done.stderr, done.stderr[-3000:]

    # the red row becomes a repro folder: confirmed red again alone, its duplicated records named
    made = acklab(tmp_path / "runs", "repro", run.parent.name, entry["scenario"], "--shrink-runs", "0")
    assert made.returncode == 0, made.stderr[-3000:]
    (folder,) = (tmp_path / "runs" / "repros").iterdir()
    assert "runs: 1 (1 to confirm it alone, 0 shrinking)" in made.stdout
    assert {"README.md", "run.sh", "params.json", "librdkafka.json", "schedule.json", "versions.json", "records.txt", "verdict.txt"} <= {
        path.name for path in folder.iterdir()
    }
    assert "duplicates == 0" in (folder / "verdict.txt").read_text()
    assert '"outcome": "acked_duplicated"' in (folder / "records.txt").read_text()
    assert json.loads((folder / "params.json").read_text())["client"] == f"librdkafka:{librdkafka.LOCKED}"


def test_an_injected_init_producer_id_error_reaches_the_java_client_which_retries_it(tmp_path: Path) -> None:
    """The proxy's own InitProducerId answer (REQUEST_TIMED_OUT, to the first request each broker
    gets) is read by the newest kafka-clients, which retries it: KAFKA-14417's fixed side."""
    done = acklab(tmp_path / "runs", "run", "--preset", "kafka-14417", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json_rows(done.stdout)  # one run: its matrix rows (its negative controls apart)
    assert row["acked"] == row["planned"] and row["fault_effective"] and row["evidence_complete"], row
    (run,) = (tmp_path / "runs").glob("2*/manifest.json")
    (record,) = _checked(json.loads(run.read_text())["scenarios"])[0]["fault_timeline"]
    assert record["counts"]["injected_errors"] >= 1 and record["target"].startswith("brokers 1, 2, 3"), record


@pytest.mark.versions
def test_kafka_14417_is_red_on_kafka_clients_3_3_1_and_green_on_3_3_2(tmp_path: Path) -> None:
    for version in ("3.3.1", "3.3.2"):
        java_client.fetch_client(version)
    done = acklab(tmp_path / "runs", "run", "--preset", "kafka-14417", "--client", "java:3.3.1", "--client", "java:3.3.2", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    by_version = {row["client_version"]: row for rows in json_pair_rows(done.stdout).values() for row in rows}
    assert by_version["3.3.1"]["acked"] == 0 and by_version["3.3.1"]["fatal_error"], by_version["3.3.1"]
    assert "Unexpected error in InitProducerIdResponse; The request timed out." in done.stderr  # the claim quotes the producer log
    assert by_version["3.3.2"]["failed"] == 0 and by_version["3.3.2"]["acked"] == by_version["3.3.2"]["planned"]

    repros = tmp_path / "repro-runs"
    done = acklab(repros, "repro", "--preset", "kafka-14417", "--client", "java:3.3.1", "--shrink-runs", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (repros / "repros").iterdir()
    assert "runs: 2 (1 to confirm it alone, 1 shrinking)" in done.stdout, done.stdout  # after the preset's own run
    params = json.loads((folder / "params.json").read_text())
    assert params["client"] == "java:3.3.1" and params["messages"] == 1_000, params  # halved once, still red
    assert json.loads((folder / "versions.json").read_text())["client"] == "java 3.3.1"
    assert "Unexpected error in InitProducerIdResponse" in (folder / "client.log").read_text()
    replayed = subprocess.run(["bash", str(folder / "run.sh")], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                              env={**os.environ, "ACKLAB_RUNS": str(tmp_path / "replayed")})
    assert replayed.returncode == 1, replayed.stderr[-3000:]  # the folder's one command: still red


@pytest.mark.versions
def test_librdkafka_4849_a_lost_add_partitions_makes_the_abort_fatal_on_the_newest_librdkafka_not_on_kafka_clients_3_9(tmp_path: Path) -> None:
    """An open bug, red on the locked (newest) confluent-kafka: its abort's EndTxn reaches a coordinator
    that never saw the transaction, INVALID_TXN_STATE is raised as fatal; kafka-clients 3.9.1 on the same
    transaction protocol retries the lost request and delivers every record."""
    java_client.fetch_client("3.9.1")
    done = acklab(tmp_path / "runs", "run", "--preset", "librdkafka-4849", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {row["client_family"]: row for row in json_rows(done.stdout)}
    assert "INVALID_TXN_STATE" in (rows["librdkafka"]["fatal_error"] or "") and rows["librdkafka"]["fault_effective"], rows["librdkafka"]
    assert rows["java"]["fatal"] == 0 and rows["java"]["failed"] == 0 and rows["java"]["fault_effective"], rows["java"]
    assert "CLAIM REPRODUCED" in done.stderr and "CLAIM NOT REPRODUCED" not in done.stderr and "CLAIM UNTESTED" not in done.stderr, done.stderr[-3000:]


@pytest.mark.versions
def test_librdkafka_4736_is_red_on_2_4_0_and_green_on_2_5_0(tmp_path: Path) -> None:
    for version in ("2.4.0", "2.5.0"):
        librdkafka.fetch_client(version)
    done = acklab(tmp_path / "runs", "run", "--preset", "librdkafka-4736", "--client-version", "2.4.0", "--client-version", "2.5.0", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    by_version = {row["client_version"]: row for rows in json_pair_rows(done.stdout).values() for row in rows}
    assert "Unable to reconstruct MessageSet" in (by_version["2.4.0"]["fatal_error"] or ""), by_version["2.4.0"]
    assert by_version["2.5.0"]["fatal"] == 0 and by_version["2.5.0"]["failed"] == 0


@pytest.mark.versions
def test_kafka_19012_sends_records_to_another_topic_on_kafka_clients_3_9_1_not_on_3_9_2(tmp_path: Path) -> None:
    """KAFKA-19012 found by version: under stall-write an expired batch's buffer is reused while its
    request is still being written, so on 3.9.1 the broker appends another batch's records to its
    topic or partition (misdirected or misrouted), and `acklab repro`'s records.txt names them; on
    3.9.2 none lands elsewhere, in any run. A timing bug (red in 5 of 6 runs here): 3.9.1 must go red
    in one of up to three comparisons. The rows, not the runs' status, are checked: the negative
    controls run with the preset's 60 kB records, and planted-reorder may plant nothing then (the run
    is then invalid, as it must be)."""
    attempts = 3
    for version in ("3.9.1", "3.9.2"):
        java_client.fetch_client(version)
    runs = tmp_path / "runs"
    red_run = None
    for _ in range(attempts):
        done = acklab(runs, "run", "--preset", "kafka-19012", "--client", "java:3.9.1", "--client", "java:3.9.2", "--json")
        assert done.returncode in (0, 1, 4), done.stderr[-3000:]
        pairs = {pair["label"]: pair["results"] for pair in json.loads(done.stdout)["pairs"]}
        by_version = {row["client_version"]: row for rows in json_pair_rows(done.stdout).values() for row in rows}
        red, green = by_version["3.9.1"], by_version["3.9.2"]
        assert red["fault_effective"] and green["fault_effective"], (red, green)
        assert green["misdirected"] == 0 and green["misrouted"] == 0, green
        assert green["lost"] == 0 and red["lost"] == 0  # acks=1 under a stalled write: failed, not lost
        if red["misdirected"] + red["misrouted"] > 0:
            (red_run,) = [results["run_id"] for label, results in pairs.items() if "3.9.1" in label]
            break
    assert red_run is not None, f"kafka-clients 3.9.1 never went red in {attempts} runs"

    made = acklab(runs, "repro", red_run, "expiring-writes__stall-write", "--shrink-runs", "0")
    if made.returncode == 0:  # its confirming run went red again: the folder names the records
        (folder,) = (runs / "repros").iterdir()
        records = (folder / "records.txt").read_text()
        assert '"misdirected": true' in records or '"misrouted": true' in records, records[:3000]
    else:  # it did not go red again when run alone: refused as bad input, nothing written
        assert made.returncode == 2, made.stderr[-3000:]

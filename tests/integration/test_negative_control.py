"""A real run that must go red: the proxy swallows writes it acknowledges in the broker's name
(`planted-loss`), and the Spark checker must count exactly those records lost, on every profile
and in every run's negative control."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acklab.proxy.behaviours.plant_loss import FABRICATED_OFFSET
from acklab.store.runs import RunDir

pytestmark = pytest.mark.integration

PROFILES = ("idempotent", "transactional", "at-least-once", "at-most-once")


def test_a_planted_loss_is_red_with_exactly_the_swallowed_records_lost(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    profiles = [arg for profile in PROFILES for arg in ("--profile", profile)]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "acklab"), "run", *profiles, "--fault", "planted-loss", "--messages", "6000", "--rate", "2000", "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "ACKLAB_RUNS": str(runs)},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {row["scenario"]: row for row in json.loads(done.stdout)}  # stdout is one JSON document
    (run,) = [RunDir(path) for path in runs.iterdir() if (path / "manifest.json").exists()]
    assert run.read_result()["status"] == "fail"
    outcomes = pq.read_table(run.audit.outcomes).to_pylist()
    for entry in run.read_manifest().scenarios:
        row = rows[entry.scenario]
        swallowed = sum(s.records for event in entry.fault_timeline for s in event.swallowed if s.topic == entry.topic)
        # Java's produce v13 names topics by id: this run's clients are librdkafka's, which name them.
        assert swallowed == entry.planted_lost == row["planted_lost"] == row["lost"] > 0, (entry.scenario, swallowed, row)
        assert row["acked"] == row["planned"] and row["failed"] == row["duplicates"] == row["offset_mismatch"] == 0, row
        mine = [o for o in outcomes if o["scenario"] == entry.scenario]
        lost = {o["id"] for o in mine if o["outcome"] == "lost"}
        assert len(lost) == row["lost"]
        if entry.profile != "at-most-once":  # acks=0: the client learns no offset
            # Which records: exactly those the client was given a made-up offset for.
            assert lost == {o["id"] for o in mine if (o["offset"] or -1) >= FABRICATED_OFFSET}
    assert rows["negative-control__planted-loss"]["control"]
    assert sum(not row["control"] for row in rows.values()) == len(PROFILES)
    control = rows["negative-control__planted-loss"]
    assert f"negative control caught: the proxy swallowed {control['lost']} records, the checker counted {control['lost']} lost" in done.stderr
    for profile in PROFILES:
        assert f"FAIL {profile}__planted-loss " in done.stderr


DUPLICATE_PROFILES = ("at-least-once", "at-least-once-ordered", "leader-ack")  # no idempotence: the broker appends a copy


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_a_planted_duplicate_is_red_with_exactly_the_copied_records_duplicated(tmp_path: Path, client: str) -> None:
    """The proxy sends some produce requests to the broker twice; the checker must count exactly
    the records the broker appended a second time as duplicates, on both client families."""
    runs = tmp_path / "runs"
    profiles = [arg for profile in DUPLICATE_PROFILES for arg in ("--profile", profile)]
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "acklab"), "run", *profiles, "--fault", "planted-duplicate", "--client", client,
            "--messages", "8000", "--rate", "2000", "--fault-at-s", "0.5", "--json",
        ],
        capture_output=True, text=True, timeout=900, env={**os.environ, "ACKLAB_RUNS": str(runs)},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {row["scenario"]: row for row in json.loads(done.stdout)}
    (run,) = [RunDir(path) for path in runs.iterdir() if (path / "manifest.json").exists()]
    assert run.read_result()["status"] == "fail"
    entries = [entry for entry in run.read_manifest().scenarios if not entry.control]
    assert sorted(entry.profile for entry in entries) == sorted(DUPLICATE_PROFILES)
    copies = {  # every copy the broker appended, of every topic of the group (Java's produce v13 names topics by id)
        (c.topic, c.partition, c.base_offset, c.records)
        for entry in entries for event in entry.fault_timeline for c in event.duplicated if c.error == "NONE"
    }
    assert sum(entry.planted_duplicates or 0 for entry in entries) == sum(records for *_, records in copies) > 0
    outcomes = pq.read_table(run.audit.outcomes).to_pylist()
    stored = pq.read_table(run.audit.topic_records).to_pylist()
    for entry in entries:
        row = rows[entry.scenario]
        assert entry.planted_duplicates == row["planted_duplicates"] == row["duplicates"] == row["duplicated"] > 0, (entry.scenario, row)
        assert row["acked"] == row["planned"] and row["lost"] == row["failed"] == row["reordered"] == row["misrouted"] == 0, row
        assert f"FAIL {entry.profile}__planted-duplicate " in done.stderr
        twice = {o["id"] for o in outcomes if o["scenario"] == entry.scenario and o["copies"] > 1}
        assert len(twice) == row["duplicated"] and all(
            o["copies"] == 2 for o in outcomes if o["scenario"] == entry.scenario and o["id"] in twice
        )
        if client == "librdkafka":  # its requests name topics: which records, by the offsets the broker gave the copies
            at_copies = {
                r["id"] for r in stored if r["scenario"] == entry.scenario
                for topic, partition, base, records in copies
                if topic == entry.topic and r["partition"] == partition and base <= r["offset"] < base + records
            }
            assert at_copies == twice

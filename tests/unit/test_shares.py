"""A run in shares without a cluster: the deal, the evidence store's attempts, and gather's choice
(the newest finished attempt; a share with none gives incomplete entries, never a pass), on a
folder and (the `s3` family, `make test-s3`) on a real S3-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acklab.orchestration import shares
from acklab.plan.planner import make_plan
from acklab.store.evidence_store import EvidenceStore
from acklab.store.runs import Manifest, RunDir

PARAMS = {"profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill", "follower-restart"], "client": "librdkafka",
          "processing": [], "messages": 30000, "negative_control": True}


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvidenceStore:
    """A store in a folder, or (the `s3` family) under a prefix of its own in a real S3-compatible server's bucket."""
    monkeypatch.setenv("ACKLAB_RUNS", str(tmp_path / "runs"))
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        server.use(monkeypatch)
        monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", f"s3://{server.bucket}/{tmp_path.name}")
    else:
        monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", f"file://{tmp_path / 'store'}")
    (tmp_path / "runs").mkdir()
    return EvidenceStore.default()


def test_deal_covers_every_group_once_and_balances() -> None:
    plan = make_plan(PARAMS)
    groups = len(plan.groups())
    for count in (1, 2, 3, groups, groups + 5):
        dealt = shares.deal(plan, count)
        assert sorted(i for share in dealt for i in share) == list(range(groups))
        assert len(dealt) == min(count, groups) and all(dealt)
        assert all(share == sorted(share) for share in dealt)
    costs = [shares.group_cost(plan, g) for g in plan.groups()]
    loads = [sum(costs[i] for i in share) for share in shares.deal(plan, 2)]
    assert max(loads) - min(loads) <= max(costs)
    assert shares.deal(plan, 2) == shares.deal(plan, 2)


def _attempt_folder(tmp_path: Path, plan, indices: list[int], name: str) -> Path:
    """A work folder as a share leaves it: entries of its scenarios, an archive part, cluster logs."""
    folder = tmp_path / name
    run = RunDir(folder)
    for index in indices:
        for scenario in plan.groups()[index]:
            entry = shares.absent_entry(plan, scenario, "x").model_copy(update={"evidence_complete": True, "incomplete_reason": None})
            run.write_entry(entry)
    (folder / "audit" / "topic_records.parquet").mkdir(parents=True)
    (folder / "audit" / "topic_records.parquet" / shares.archive_part(1)).write_bytes(b"parquet")
    (folder / "cluster" / "node-1").mkdir(parents=True)
    (folder / "cluster" / "node-1" / "server.log").write_text("log")
    return folder


def test_gather_takes_the_newest_finished_attempt_and_marks_a_dead_share_incomplete(store: EvidenceStore, tmp_path: Path) -> None:
    plan = make_plan(PARAMS)
    run = RunDir.create()
    run.write_plan(plan)
    dealt = [{"share": k, "groups": g, "scenarios": sum(len(plan.groups()[i]) for i in g), "label": ""} for k, g in enumerate(shares.deal(plan, 2), 1)]
    one, two = dealt
    # share 1: attempt 1 killed (no finished.json), attempt 2 finished; share 2: only a killed attempt.
    store.publish(_attempt_folder(tmp_path, plan, one["groups"], "a1"), run.run_id, 1, 1)
    store.publish(_attempt_folder(tmp_path, plan, one["groups"], "a2"), run.run_id, 1, 2)
    store.finish(run.run_id, 1, 2, {"attempt": 2})
    store.publish(_attempt_folder(tmp_path, plan, two["groups"], "b1"), run.run_id, 2, 1)
    assert store.attempts(run.run_id, 1) == {1: None, 2: {"attempt": 2}}
    with pytest.raises(FileExistsError):
        store.publish(tmp_path / "a2", run.run_id, 1, 2)

    job = shares.gather({"run_dir": str(run.root), "run_id": run.run_id}, dealt, heartbeat_s=0)

    record = json.loads(run.shares.read_text())["shares"]
    assert [(s["gathered"], s["unfinished"]) for s in record] == [(2, [1]), (None, [1])]
    manifest = Manifest.model_validate_json(run.manifest.read_text())
    assert manifest.bootstrap_servers is None and len(manifest.scenarios) == len(plan.scenarios)
    complete = {e.scenario: e.evidence_complete for e in manifest.scenarios}
    share_two = {s.name for i in two["groups"] for s in plan.groups()[i]}
    assert {name for name, ok in complete.items() if not ok} == share_two
    assert all("share 2 never finished" in e.incomplete_reason for e in manifest.scenarios if e.scenario in share_two)
    assert (run.share_folder(1) / "cluster" / "node-1" / "server.log").read_text() == "log"
    assert not run.share_folder(2).exists()
    assert job["application_args"][-2:] == ["--topic-records", str(run.audit.topic_records)]
    assert (run.audit.topic_records / shares.archive_part(1)).exists()
    assert not list(run.root.glob(".share-*")), "a staging folder was left"


@pytest.mark.parametrize("given", ["gcs://bucket", "memory://x", "relative/folder", "file://relative", "s3://", "s3:///acklab",
                                   "s3://Bucket/acklab", "s3://b/acklab", "s3://bucket_1"])
def test_the_store_refuses_what_is_not_offered(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from acklab.base.spec import SpecError
    from acklab.store.evidence_store import store_url

    monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", given)
    with pytest.raises(SpecError, match=r"is not offered; allowed: an absolute path or a file:// URL .*, or s3://<bucket>/<prefix>"):
        store_url()


@pytest.mark.parametrize(("given", "url"), [("s3://acklab-evidence", "s3://acklab-evidence"),
                                             ("s3://acklab.evidence/team/night/", "s3://acklab.evidence/team/night")])
def test_the_store_takes_an_s3_bucket_and_prefix(given: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from acklab.store.evidence_store import store_url

    monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", given)
    assert store_url() == url


def test_the_store_takes_an_absolute_path_as_a_file_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acklab.store.evidence_store import store_url

    monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", str(tmp_path))
    assert store_url() == f"file://{tmp_path}"
    monkeypatch.setenv("ACKLAB_EVIDENCE_STORE", f"file://{tmp_path}")
    assert store_url() == f"file://{tmp_path}"


def test_a_runs_cluster_folders_are_its_own_then_each_gathered_shares(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    assert run.cluster_folders() == []
    for folder in (run.share_folder(2) / "cluster", run.share_folder(1) / "cluster", run.share_folder(3)):
        folder.mkdir(parents=True)
    assert run.cluster_folders() == [run.share_folder(1) / "cluster", run.share_folder(2) / "cluster"]
    run.cluster.mkdir()
    assert run.cluster_folders()[0] == run.cluster

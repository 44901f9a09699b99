"""The evidence store on a real S3-compatible server (SeaweedFS on 127.0.0.1, `make test-s3`): an
attempt's files come back byte for byte, a `finished.json` another process writes is seen at once,
the server's signature check is real, and the reduced matrix in two shares runs green with its
shares' evidence only in the bucket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.store.evidence_store import EvidenceStore

from ..celery.test_celery import REDUCED
from ..helpers import BIN, assert_share_left_nothing

pytestmark = [pytest.mark.integration, pytest.mark.s3]

SHARES = "kafka_delivery_matrix_shares"


def test_an_attempt_comes_back_byte_for_byte_and_another_processs_finish_is_seen_at_once(
    s3_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_server.use(monkeypatch)
    store = EvidenceStore(f"s3://{s3_server.bucket}/{tmp_path.name}")
    work = tmp_path / "work"
    files = {"scenarios/a__none/producers/p0.sendlog": bytes(range(256)) * 4096, "audit/topic_records.parquet/part-s001.parquet": b"PAR1",
             "cluster/node-1/server.log": "é\n".encode()}
    for relative, data in files.items():
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        (work / relative).write_bytes(data)
    (work / "link").symlink_to(work / "cluster")
    store.publish(work, "r1", 1, 1)
    assert store.attempts("r1", 1) == {1: None}
    with pytest.raises(FileExistsError):
        store.publish(work, "r1", 1, 1)

    finish = "from acklab.store.evidence_store import EvidenceStore; import sys; EvidenceStore(sys.argv[1]).finish('r1', 1, 1, {'attempt': 1})"
    subprocess.run([sys.executable, "-c", finish, store.url], check=True, timeout=60)
    assert store.attempts("r1", 1) == {1: {"attempt": 1}}, "a finish written by another process was not seen"

    back = tmp_path / "back"
    assert sorted(store.fetch("r1", 1, 1, back)) == sorted(files)
    assert {relative: (back / relative).read_bytes() for relative in files} == files


def test_a_wrong_secret_is_refused_and_writes_nothing(s3_server, tmp_path: Path) -> None:
    with pytest.raises(PermissionError):
        s3_server.client(secret="0" * 40).pipe(f"{s3_server.bucket}/{tmp_path.name}/x", b"x")
    assert not s3_server.client().exists(f"{s3_server.bucket}/{tmp_path.name}/x")


def test_two_shares_through_an_s3_store_are_green_and_keep_their_evidence_in_the_bucket(
    s3_server, acklab_env: dict[str, str], isolated_run_store: Path, tmp_path: Path
) -> None:
    url = f"s3://{s3_server.bucket}/{tmp_path.name}"
    env = {**acklab_env, **s3_server.env, "ACKLAB_EVIDENCE_STORE": url}
    before = set(isolated_run_store.iterdir())
    done = subprocess.run([str(BIN / "airflow"), "dags", "test", SHARES, "-c", json.dumps({**REDUCED, "shares": 2})],
                          env=env, capture_output=True, text=True, timeout=900)
    (folder,) = [p for p in set(isolated_run_store.iterdir()) - before if (p / "manifest.json").exists()]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "pass" and len(result["scenarios"]) == 6, result
    record = json.loads((folder / "shares.json").read_text())
    assert record["store"] == url
    assert [(s["gathered"], s["unfinished"]) for s in record["shares"]] == [(1, []), (1, [])]
    store = EvidenceStore(url)
    for share in (1, 2):
        finished = store.attempts(folder.name, share)[1]
        assert finished is not None and finished["share"] == share
        assert_share_left_nothing(folder, share)
    assert not (isolated_run_store / "evidence-store" / folder.name).exists(), "a share published to the local store"

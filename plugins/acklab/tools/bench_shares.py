"""`make bench-shares`: the cost model of a run in shares (`acklab.orchestration.shares`), measured.

Runs the shares DAG (`kafka_delivery_matrix_shares`) through `airflow dags test` twice with the same
params: as 1 share, then as 2. `airflow dags test` runs one task at a time, so the two shares run one
after the other on this host: what this measures is the fixed cost a share adds (its cluster, its
archive read, teardown, publishing), not a speed-up, which two shares competing for two cores
could not show. Prints, per run, each DAG task's seconds and each share's phases (from its
`finished.json`), then:

- `share fixed seconds`: a share's time beyond its groups (plan fetch, provision, archive read,
  teardown, publish), the mean over the 2-share run's shares;
- `run fixed seconds`: the run's time outside its share tasks (plan, deal, gather, audit, validate);
- `audit seconds per million records`: the audit task over the topic records it read;
- `ratio 2-share/1-share share-task seconds`: the share tasks' sum, 2 shares over 1 (1.00: free);
- `projected wall seconds for N workers`: run fixed + share fixed + groups / N, for N = 1, 2, 4, 8
  (groups spread evenly; the audit's growth with records is `make bench-audit`'s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer

from acklab.base.paths import runs_dir
from acklab.store.evidence_store import EvidenceStore
from acklab.store.runs import RunDir, runs
from acklab.tools.bench_matrix import task_spans

DAG_ID = "kafka_delivery_matrix_shares"
WORKERS = (1, 2, 4, 8)


def _run(conf: dict[str, Any], shares: int) -> dict[str, Any]:
    """One DAG test of `conf` in `shares` shares: its wall, task spans, shares' phases and records."""
    before = {run.run_id for run in runs()}
    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "dags", "test", DAG_ID, "-c", json.dumps({**conf, "shares": shares})],
        env={**os.environ, "ACKLAB_BIND_CLUSTER_TO_PID": "1"}, capture_output=True, text=True, check=False,
    )
    wall = time.monotonic() - started
    new = [run for run in runs() if run.run_id not in before and run.manifest.exists()]
    if len(new) != 1:
        print(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"expected one new run in {runs_dir()}, found {len(new)} (dags test exit {done.returncode})")
    run: RunDir = new[0]
    run.dags_test_log.write_text(done.stdout + done.stderr)
    record = json.loads(run.shares.read_text())
    store = EvidenceStore(record["store"])
    finished = [store.attempts(run.run_id, s["share"]).get(s["gathered"]) for s in record["shares"]]
    status = run.read_result()["status"] if run.result.exists() else "no result"
    return {"run": run, "wall": wall, "spans": task_spans(done.stdout + done.stderr), "shares": finished, "status": status}


def _report(measured: dict[str, Any], shares: int) -> None:
    print(f"== {shares} share(s): {measured['run'].root}; status {measured['status']}; wall {measured['wall']:.0f} s")
    for task, index, seconds in measured["spans"]:
        print(f"phase {task}{f'[{index}]' if index >= 0 else ''}: {seconds:.1f} s")
    for share in measured["shares"]:
        if share is None:
            print("  a share never finished")
            continue
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in share["phases"].items())
        print(f"  share {share['share']}: {len(share['scenarios'])} scenario(s), {share['topic_records']:,} records, loads {share['loads']:.1f} s; {phases}")


def main(conf: str = typer.Option("{}", help="DAG params as JSON (default: the standard matrix)")) -> None:
    params = json.loads(conf)
    one, two = _run(params, 1), _run(params, 2)
    _report(one, 1)
    _report(two, 2)
    if any(share is None for share in (*one["shares"], *two["shares"])):
        raise SystemExit("a share never finished: no cost model from this run")

    def share_tasks(measured: dict[str, Any]) -> float:
        return sum(seconds for task, _, seconds in measured["spans"] if task == "run_share")

    def fixed(share: dict[str, Any]) -> float:
        return sum(seconds for name, seconds in share["phases"].items() if name != "groups")

    share_fixed = sum(fixed(share) for share in two["shares"]) / len(two["shares"])
    groups = sum(share["phases"]["groups"] for share in one["shares"])
    run_fixed = sum(seconds for task, _, seconds in two["spans"] if task != "run_share")
    audit = next(seconds for task, _, seconds in two["spans"] if task == "audit")
    records = sum(share["topic_records"] for share in two["shares"])
    print(f"share fixed seconds: {share_fixed:.1f} (1 share: {fixed(one['shares'][0]):.1f})")
    print(f"groups seconds (1 share): {groups:.0f}; loads seconds: {sum(s['loads'] for s in one['shares']):.0f}")
    print(f"run fixed seconds: {run_fixed:.1f}")
    print(f"audit seconds per million records: {audit / max(records, 1) * 1e6:.1f} ({records:,} records, {audit:.1f} s)")
    for workers in WORKERS:
        print(f"projected wall seconds for {workers} worker(s): {run_fixed + share_fixed + groups / workers:.0f}")
    print(f"ratio 2-share/1-share share-task seconds: {share_tasks(two) / share_tasks(one):.2f}")


if __name__ == "__main__":
    typer.run(main)

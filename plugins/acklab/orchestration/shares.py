"""A run in shares: work that can move to any worker (the *orchestration* seam's scale-out).

A share is a set of the plan's scenario groups (`deal`). `run_share` runs one share anywhere: it
fetches the plan from the evidence store (`acklab.store.evidence_store`), provisions a cluster of its
own in a work folder of its host (`acklab.base.paths.work_dir`), runs its groups, reads its topics
back into the records archive, tears the cluster down and publishes its folder to the store, with
`finished.json` last. Nothing later needs that host: `gather` copies each share's finished attempt
into the run folder, gives every scenario of a share that never finished an entry whose evidence is
incomplete (never a pass), and writes the manifest; the Spark audit then reads the archive
(`--topic-records`), on `local[*]` or a standalone master.

A share's attempt is its Airflow try: a retried share writes a new attempt folder (its own cluster,
its own topics, named after the attempt) and never mixes its evidence with an earlier one's; only
the newest finished attempt is gathered. A killed attempt's cluster stops with its heartbeat and is
reaped (`gather` waits for that on its host, then publishes the dead attempt's folder as unfinished
and removes it)."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from acklab.base.paths import work_dir
from acklab.checker.audit import archive_records
from acklab.checker.submit import audit_job
from acklab.cluster.backends import reap_orphans
from acklab.cluster.state import STATE_FILE, ClusterState, keep_alive
from acklab.orchestration import execution
from acklab.orchestration.pipeline import provision
from acklab.plan.planner import RunPlan, ScenarioPlan
from acklab.store.evidence_store import EvidenceStore
from acklab.store.runs import RunDir, ScenarioEntry, write_json
from acklab.store.schemas import PIPELINE_OUTPUT_RECORDS, TOPIC_RECORDS
from acklab.workload.producer import Progress

log = logging.getLogger(__name__)

GROUP_FIXED_S = 15.0  # a group's cost beyond its load: topics, producers' start, the health gate
UNTIMED_RATE = 50_000.0  # messages per second assumed of a load without a rate or a duration


def group_cost(plan: RunPlan, group: list[ScenarioPlan]) -> float:
    """A group's estimated seconds: its longest load (duration, else messages at its rate, else at
    `UNTIMED_RATE`) plus `GROUP_FIXED_S`."""
    def load_s(scenario: ScenarioPlan) -> float:
        load = scenario.load or plan.load
        return load.duration_s or load.messages / (load.rate or UNTIMED_RATE)

    return max(load_s(scenario) for scenario in group) + GROUP_FIXED_S


def deal(plan: RunPlan, shares: int) -> list[list[int]]:
    """The plan's group indices dealt into at most `shares` shares (no empty one) of nearly equal
    estimated time: longest group first, each to the share with the least so far; each share's
    groups in plan order (a negative control first). The same plan and count give the same deal."""
    groups = plan.groups()
    count = max(1, min(shares, len(groups)))
    costs = [group_cost(plan, group) for group in groups]
    dealt: list[list[int]] = [[] for _ in range(count)]
    load = [0.0] * count
    for index in sorted(range(len(groups)), key=lambda i: (-costs[i], i)):
        least = load.index(min(load))
        dealt[least].append(index)
        load[least] += costs[index]
    return [sorted(share) for share in dealt]


def share_list(run: dict[str, Any], shares: int) -> list[dict[str, Any]]:
    """What the DAG maps over: each share's number (from 1), group indices, label and scenario count;
    the plan is published to the evidence store for the shares to fetch."""
    folder = RunDir(Path(run["run_dir"]))
    EvidenceStore.default().put_plan(run["run_id"], folder.plan)
    return shares_of(folder.read_plan(RunPlan), shares)


def shares_of(plan: RunPlan, shares: int) -> list[dict[str, Any]]:
    """The plan's shares (`deal`): each one's number (from 1), group indices, label and scenario count."""
    groups = plan.groups()
    return [
        {
            "share": number, "groups": indices, "scenarios": sum(len(groups[i]) for i in indices),
            "label": f"share {number}: " + ", ".join(plan.group_label(groups[i]) for i in indices),
        }
        for number, indices in enumerate(deal(plan, shares), start=1)
    ]


def work_folder(run_id: str, share: int, attempt: int) -> RunDir:
    """The share attempt's folder on this host: a run folder's layout, its name (so its topics' names)
    the run's, share's and attempt's."""
    return RunDir(work_dir() / f"{run_id}.share-{share}.attempt-{attempt}")


def run_share(
    run_id: str, share: dict[str, Any], attempt: int, *, lease_s: float, heartbeat_s: float | None, owner_pid: int | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run one share's groups on a cluster of its own and publish its evidence (module docstring).
    The cluster is bound to `owner_pid` if given, else to this task's heartbeat (`heartbeat_s`).
    Returns what `finished.json` says; raises after publishing the attempt as unfinished if it fails."""
    store = EvidenceStore.default()
    work = work_folder(run_id, share["share"], attempt)
    work.root.mkdir(parents=True)
    phases: dict[str, float] = {}
    clock = _Clock(phases)
    try:
        with clock("fetch_plan"):
            store.get_plan(run_id, work.plan)
            plan = work.read_plan(RunPlan)
        with keep_alive(work.cluster):
            with clock("provision"):
                cluster = provision(plan, work, bind_to_pid=owner_pid, heartbeat_s=heartbeat_s, lease_s=lease_s)
            try:
                with clock("groups"):
                    for index in share["groups"]:
                        execution.run_group(cluster, plan, index, work, progress)
                entries = [work.read_entry(s.name) for index in share["groups"] for s in plan.groups()[index]]
                with clock("archive"):
                    records = archive_records(work, entries, cluster.direct_bootstrap_servers, work.audit, archive_part(share["share"]))
            finally:
                with clock("teardown"):
                    cluster.teardown()
        with clock("publish"):
            _publish(store, work, run_id, share["share"], attempt)
    except BaseException:
        _publish(store, work, run_id, share["share"], attempt)
        raise
    finished = {
        "share": share["share"], "attempt": attempt, "host": socket.gethostname(), "groups": share["groups"],
        "scenarios": [e.scenario for e in entries], "topic_records": records, "phases": phases,
        "loads": loads_s(entries),
    }
    store.finish(run_id, share["share"], attempt, finished)
    log.info("share %d attempt %d: %d scenario(s), %d topic record(s); %s", share["share"], attempt, len(entries), records,
             ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()))
    return finished


class _Clock:
    """Times named phases into a dict (seconds), also when a phase raises."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(time.monotonic() - started, 3)


def loads_s(entries: list[ScenarioEntry]) -> float:
    """Seconds of load in the groups of `entries`: each group's longest load (its scenarios load side
    by side), added up; a scenario without load times counts for nothing."""
    longest: dict[int, float] = {}
    for entry in entries:
        if entry.group is not None and entry.load_started is not None and entry.load_ended is not None:
            longest[entry.group.index] = max(longest.get(entry.group.index, 0.0), entry.load_ended - entry.load_started)
    return sum(longest.values())


def archive_part(share: int) -> str:
    """The share's file of each records archive."""
    return f"part-s{share:03d}.parquet"


def _publish(store: EvidenceStore, work: RunDir, run_id: str, share: int, attempt: int) -> None:
    """Publish the work folder (its plan copy left out), unless this attempt is published already,
    and remove it from this host."""
    work.plan.unlink(missing_ok=True)
    if attempt not in store.attempts(run_id, share):
        store.publish(work.root, run_id, share, attempt)
    shutil.rmtree(work.root, ignore_errors=True)


def settle_dead_attempts(run_id: str, wait_s: float, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """This host's work folders of `run_id` left by attempts that died (their task was killed): wait
    up to `wait_s` for their clusters to be orphaned (heartbeat stopped), reap them, publish each
    folder as an unfinished attempt and remove it. Returns the folders settled."""
    pattern = f"{run_id}.share-*.attempt-*"
    deadline = time.monotonic() + wait_s
    while True:
        folders = sorted(work_dir().glob(pattern))
        live = [f for f in folders if _cluster_live(f / "cluster")]
        if not live or time.monotonic() > deadline:
            break
        sleep(2.0)
    reap_orphans(work_dir())
    store, settled = EvidenceStore.default(), []
    for folder in sorted(work_dir().glob(pattern)):
        if _cluster_live(folder / "cluster"):
            log.warning("%s: its cluster still runs; left for the reaper", folder)
            continue
        share, attempt = (int(part.rsplit("-", 1)[1]) for part in folder.name.split(".")[-2:])
        _publish(store, RunDir(folder), run_id, share, attempt)
        settled.append(str(folder))
    return settled


def _cluster_live(root: Path) -> bool:
    """A cluster provisioned in `root` is running and not yet orphaned."""
    if not (root / STATE_FILE).exists():
        return False
    try:
        state = ClusterState.load(root)
    except (ValueError, OSError):
        return False
    return state.status == "running" and not state.is_orphaned(root)


def absent_entry(plan: RunPlan, scenario: ScenarioPlan, reason: str) -> ScenarioEntry:
    """The entry of a scenario whose share never finished: what was planned, no evidence, incomplete."""
    return ScenarioEntry(**execution.planned_fields(plan, scenario), evidence_complete=False, incomplete_reason=reason)


def gather(run: dict[str, Any], shares: list[dict[str, Any]], heartbeat_s: float) -> dict[str, Any]:
    """Copy each share's newest finished attempt into the run folder (its cluster's logs under
    `shares/share-<k>/`), give the scenarios of a share without one an incomplete entry, record
    `shares.json`, write the manifest and return the audit job (from the records archive)."""
    folder = RunDir(Path(run["run_dir"]))
    run_id = folder.run_id
    settled = settle_dead_attempts(run_id, heartbeat_s + 15.0)
    plan = folder.read_plan(RunPlan)
    groups = plan.groups()
    store = EvidenceStore.default()
    record = []
    for share in shares:
        attempts = store.attempts(run_id, share["share"])
        finished = [n for n, marker in attempts.items() if marker is not None]
        scenarios = [s for index in share["groups"] for s in groups[index]]
        if finished:
            gathered = max(finished)
            staging = folder.root / f".share-{share['share']}"
            store.fetch(run_id, share["share"], gathered, staging)
            _move_in(staging, folder, share["share"])
        else:
            gathered = None
            reason = f"share {share['share']} never finished: " + (
                f"attempt(s) {', '.join(map(str, attempts))} ended without finished.json (their worker died or the share failed)"
                if attempts else "no attempt published (it never ran, or its worker died before it could)"
            )
            for scenario in scenarios:
                folder.write_entry(absent_entry(plan, scenario, reason))
        record.append({**share, "gathered": gathered, "unfinished": [n for n in attempts if n != gathered]})
        log.info("share %d: %s", share["share"], f"attempt {gathered} gathered" if gathered else "no finished attempt: its scenarios are incomplete")
    write_json(folder.shares, {"store": store.url, "shares": record, "settled": settled})
    _ensure_archive(folder)
    execution.write_manifest(None, plan, folder)
    job = audit_job(folder, topic_records=folder.audit.topic_records)
    return {
        **run, "manifest": str(job.manifest), "audit_out": str(job.out.root), "topic_records": str(folder.audit.topic_records),
        "application_args": job.application_args,
    }


def _move_in(staging: Path, folder: RunDir, share: int) -> None:
    """An attempt's fetched files into the run folder: scenarios and archive parts in place, its
    cluster's folder as `shares/share-<k>/cluster`."""
    for child in sorted(staging.iterdir()):
        if child.name == "cluster":
            target = folder.share_folder(share) / "cluster"
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            child.rename(target)
            continue
        for path in sorted(p for p in child.rglob("*") if p.is_file()):
            target = folder.root / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    shutil.rmtree(staging, ignore_errors=True)


def _ensure_archive(folder: RunDir) -> None:
    """Each records archive of the run holds at least an empty file (every share may have failed)."""
    for path, schema in ((folder.audit.topic_records, TOPIC_RECORDS), (folder.audit.pipeline_records, PIPELINE_OUTPUT_RECORDS)):
        path.mkdir(parents=True, exist_ok=True)
        if not any(path.glob("*.parquet")):
            pq.write_table(schema.empty_table(), path / "part-empty.parquet")


"""Running a plan's scenario groups on a cluster: one fresh topic per scenario, the loads of a
group side by side under one fault schedule, each scenario's evidence written to the run store.

The same functions back the CLI and the DAG tasks, so both run a scenario the same way."""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import Consumer, TopicPartition

from acklab.base.spec import SpecError
from acklab.cluster.cluster import Cluster
from acklab.nemesis.actions import FaultContext
from acklab.nemesis.events import FaultEvent, FaultOutcome
from acklab.nemesis.faults import FAULTS, PLANTED_LOSS, PLANTING
from acklab.nemesis.runner import Nemesis
from acklab.nemesis.watch import LeaderWatch
from acklab.plan.planner import RunPlan, ScenarioPlan
from acklab.store.runs import EarlierAttempt, FaultRecord, GroupTiming, Manifest, PipelineEvidence, RunDir, ScenarioEntry
from acklab.workload import families
from acklab.workload.processing import ProcessorJob
from acklab.workload.processors import ProcessorGroup
from acklab.workload.producer import START_TIMEOUT_S, LoadResult, Progress, run_load
from acklab.workload.spec import scenario_topics
from acklab.workload.worker import PARENT_GONE, SIGTERM_STOP

log = logging.getLogger(__name__)

# After its transaction.timeout.ms, the coordinator aborts an open transaction within
# transaction.abort.timed.out.transaction.cleanup.interval.ms (broker default 10 s); a partition
# whose last stable offset stays behind after that holds a transaction no coordinator will end.
HANGING_MARGIN_S = 15.0
# Runs of a group's scenarios at most: once more for those whose evidence was incomplete.
ATTEMPTS = 2


def run_scenarios(cluster: Cluster, plan: RunPlan, run: RunDir, progress: Progress | None = None) -> Manifest:
    """Run every scenario group of `plan` on `cluster`; return the manifest.

    Scenarios of later plans on the same cluster and run folder are appended to the manifest, so one
    audit covers them all."""
    _check_unique(plan, run)
    for index in range(len(plan.groups())):
        run_group(cluster, plan, index, run, progress)
    return write_manifest(cluster, plan, run)


def write_manifest(cluster: Cluster | None, plan: RunPlan, run: RunDir) -> Manifest:
    """Append the plan's scenario entries (each group wrote its scenarios' `entry.json`) to the
    run's manifest; a missing entry is an error, never a silently smaller matrix. Without a cluster
    (a run in shares, gone by now) the manifest names no bootstrap servers: it is audited from its
    records archive."""
    _check_unique(plan, run)
    manifest = run.read_manifest() if run.manifest.exists() else Manifest(
        run_id=run.run_id, bootstrap_servers=cluster.direct_bootstrap_servers if cluster else None, topology=plan.topology.model_dump()
    )
    missing = [s.name for s in plan.scenarios if not run.scenario(s.name).entry.exists()]
    if missing:
        raise RuntimeError(f"scenarios without evidence (their group did not finish): {missing}")
    manifest.params.append(plan.params.model_dump(mode="json"))
    manifest.scenarios += [run.read_entry(s.name) for s in plan.scenarios]
    run.write_manifest(manifest)
    return manifest


def _check_unique(plan: RunPlan, run: RunDir) -> None:
    taken = {entry.scenario for entry in run.read_manifest().scenarios} if run.manifest.exists() else set()
    if clash := taken & {scenario.name for scenario in plan.scenarios}:
        raise SpecError(f"scenarios already in this run: {sorted(clash)}")


def topic_name(run: RunDir, scenario: str) -> str:
    """The scenario's own topic: Kafka allows only ASCII alphanumerics, '.', '_' and '-' (a schedule's
    label joins its faults with '+')."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"acklab-{run.run_id}-{scenario}")


def run_group(
    cluster: Cluster, plan: RunPlan, index: int, run: RunDir, progress: Progress | None = None, attempts: int = ATTEMPTS
) -> list[ScenarioEntry]:
    """Run scenario group `index` (`_attempt`); its scenarios whose evidence is incomplete (a broker
    fenced on a busy machine, a fault that did not show) run again, up to `attempts` runs in all.
    Each earlier run's folder is set aside as `<scenario>.attempt-<n>` and named in the entry's
    `earlier_attempts`; the entry, its evidence and so its verdict are the last run's.

    Writes and returns each scenario's manifest entry."""
    group = plan.groups()[index]
    started = time.time()
    entries = _attempt(cluster, plan, index, group, run, progress, 1)
    for attempt in range(2, attempts + 1):
        again = [i for i, entry in enumerate(entries) if not entry.evidence_complete and not _interrupted(entry)]
        if not again:
            break
        for i in again:
            log.warning("scenario %s: evidence incomplete (%s): running it again", entries[i].scenario, entries[i].incomplete_reason)
        earlier = {i: _set_aside(run, entries[i], attempt - 1) for i in again}
        retried = _attempt(cluster, plan, index, [group[i] for i in again], run, progress, attempt)
        for i, entry in zip(again, retried, strict=True):
            entries[i] = entry.model_copy(update={"earlier_attempts": [*entries[i].earlier_attempts, earlier[i]]})
    timing = GroupTiming(index=index, started=started, ended=time.time(), scenarios=len(group))
    entries = [entry.model_copy(update={"group": timing}) for entry in entries]
    for entry in entries:
        run.write_entry(entry)
    return entries


def _interrupted(entry: ScenarioEntry) -> bool:
    """A producer of the scenario was stopped by a signal or lost its parent: the run is being
    stopped, not run again."""
    return any(reason in (SIGTERM_STOP, PARENT_GONE) for reason in entry.stop_reasons.values())


def _set_aside(run: RunDir, entry: ScenarioEntry, attempt: int) -> EarlierAttempt:
    """Move a run of the scenario to `<scenario>.attempt-<attempt>` (kept, never audited)."""
    folder = run.scenario(entry.scenario).root
    kept = folder.rename(folder.with_name(f"{folder.name}.attempt-{attempt}"))
    return EarlierAttempt(
        topic=entry.topic or "", evidence=run.relative(kept), incomplete_reason=entry.incomplete_reason,
        fault_effect=entry.fault_effect, load_started=entry.load_started,
    )


def _attempt(
    cluster: Cluster, plan: RunPlan, index: int, group: list[ScenarioPlan], run: RunDir, progress: Progress | None, attempt: int
) -> list[ScenarioEntry]:
    """`_run_group` with the processors of its pipelines, which are killed whatever happens."""
    processors: dict[str, ProcessorGroup] = {}
    try:
        return _run_group(cluster, plan, index, group, run, progress, attempt, processors)
    finally:
        for processor_group in processors.values():
            processor_group.close()


def _run_group(
    cluster: Cluster, plan: RunPlan, index: int, group: list[ScenarioPlan], run: RunDir, progress: Progress | None, attempt: int,
    processors: dict[str, ProcessorGroup],
) -> list[ScenarioEntry]:
    """One run of `group` (scenarios of group `index`): the profiles of one fault side by side on fresh
    topics with the same replica assignment (so the fault's target, partition 0 of the first topic,
    has the same leader and followers in every topic; `replica_assignment`: the active controller never
    leads a leader fault's target), one fault schedule for all, then the health gate.

    The producers are given the topics' partition count (the topology's: the topics are created
    here), so each is ready once built, not once it has read the topic's metadata; the schedule
    starts once every producer is ready and every topic is in sync, or, with a step before the load,
    once the topics exist and that step has shown its effect (the producers then start against it).

    A pipeline scenario's processors (`processors`, by input topic) start once its topics are in
    sync and consume until the load has ended and the group committed every input (`_drain`).

    Returns each scenario's manifest entry (not written yet)."""
    topology = plan.topology
    topics = [topic_name(run, scenario.name) + ("" if attempt == 1 else f"-attempt-{attempt}") for scenario in group]
    pipelines = {topic: scenario for topic, scenario in zip(topics, group, strict=True) if scenario.pipeline is not None}
    targets = [step.parsed_target for step in group[0].schedule if step.target]
    targeted = [target.partition for target in targets if target.kind == "leader" and target.topic is None]
    assignment = replica_assignment(
        sorted(topology.broker_ids), topology.partitions, topology.replication_factor, index, cluster.active_controller(), targeted
    )
    nemesis = Nemesis(FaultContext(cluster, topics[0], topology.min_insync_replicas, processors=processors), group[0].schedule)
    moves_leaders = any(FAULTS[step.fault].moves_leaders for step in group[0].schedule)
    load_spec = plan.load_of(group)
    watch = None if moves_leaders else LeaderWatch(cluster, [name for topic in topics for name in scenario_topics(topic, load_spec.topics)])
    log.info("group %d (%s): %d scenario(s), %d messages each", index, plan.group_label(group), len(group), load_spec.messages)
    topics_ready = threading.Event()

    def create_topics() -> None:
        every = [*(name for topic in topics for name in scenario_topics(topic, load_spec.topics)), *(output_topic(topic) for topic in pipelines)]
        with cluster.admin() as admin:
            admin.create_topics(every, assignment)
            for topic in every:
                admin.wait_in_sync(topic, 60)
        for topic, scenario in pipelines.items():
            processors[topic] = _start_processors(cluster, topic, scenario, run)
        for processor_group in processors.values():
            processor_group.wait_assigned(topology.partitions, PROCESSORS_READY_S)
        topics_ready.set()

    def start_faults() -> None:  # once every producer is ready and every topic fully in sync
        if not topics_ready.wait(START_TIMEOUT_S):
            raise TimeoutError("topics of the group not ready")
        if watch is not None:
            watch.start()
        if not nemesis.started:
            nemesis.start()

    ready = threading.Barrier(len(group), action=start_faults, timeout=START_TIMEOUT_S + 30)
    totals = _GroupProgress(len(group), progress)

    def load(n: int) -> LoadResult:
        try:
            return run_load(
                cluster.bootstrap_servers, topics[n], group[n].profile, load_spec, run.scenario(group[n].name), totals.of(n), ready.wait,
                group[n].client, topology.partitions,
            )
        except BaseException:
            ready.abort()  # the other loads stop waiting for this one
            raise

    if nemesis.before_load:  # no producer may exist before the fault is in effect
        create_topics()
        try:
            nemesis.start_before_load(START_TIMEOUT_S)
        except BaseException:
            nemesis.abort()  # the fault is undone
            raise
    with ThreadPoolExecutor(len(group), thread_name_prefix="load") as pool:
        futures = [pool.submit(load, n) for n in range(len(group))]  # producers start while topics are created
        try:
            if not topics_ready.is_set():
                create_topics()
        except BaseException:
            ready.abort()
            raise
        finally:
            wait(futures)
            nemesis.load_ended()
            unplanned = watch.stop() if watch is not None else None
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        if nemesis.started:
            nemesis.abort()
        raise failed[0]  # type: ignore[misc]
    outcome = nemesis.join()
    cluster.wait_healthy(120)
    load_ended = max((f.result().ended for f in futures), default=time.time())
    drained = _drain_all(cluster, processors, pipelines, topology.partitions, load_ended, run)
    hanging = open_transactions(cluster, {t: s for t, s in zip(topics, group, strict=True) if s.profile.transaction}, topology.partitions)
    transactional = {t: run.scenario(s.name).send_log for t, s in zip(topics, group, strict=True) if s.profile.transaction is not None}
    planted = planted_counts(cluster, outcome, topics, {step.fault for step in group[0].schedule}, transactional)
    entries = [
        _entry(plan, scenario, topic, future.result(), outcome, unplanned, run, hanging.get(topic), planted[topic], drained.get(topic),
               load_spec.topics)
        for scenario, topic, future in zip(group, topics, futures, strict=True)
    ]
    if watch is None:
        return entries
    disturbed = [
        entry.model_copy(update={"disturbances": list(dict.fromkeys(d for topic in entry.load_topics for d in watch.of_topic(topic)))})
        for entry in entries
    ]
    for entry in disturbed:
        if entry.disturbances:
            log.warning("scenario %s: unplanned during the load: %s", entry.scenario, "; ".join(entry.disturbances))
    return disturbed


PROCESSORS_READY_S = 60.0  # the processors of a pipeline are assigned every input partition within this
DRAIN_S = 90.0  # after the load, a pipeline's group commits every input within this, or the inputs left are unprocessed


def output_topic(topic: str) -> str:
    """A pipeline's output topic, beside its input topic `topic`."""
    return f"{topic}-out"


def _start_processors(cluster: Cluster, topic: str, scenario: ScenarioPlan, run: RunDir) -> ProcessorGroup:
    """Start the processor instances of pipeline `scenario` on its input topic `topic`."""
    pipeline = scenario.pipeline
    assert pipeline is not None
    template = ProcessorJob(
        bootstrap_servers=cluster.bootstrap_servers, input_topic=topic, output_topic=output_topic(topic), group_id=f"{topic}-processors",
        instance=0, style=pipeline.style, group_protocol=pipeline.group_protocol, log="-",
        consumer_config=pipeline.config.as_text("consumer", scenario.client.family),
        producer_config=pipeline.config.as_text("producer", scenario.client.family),
    )
    group = ProcessorGroup(families.of(scenario.client), scenario.client, run.scenario(scenario.name).root / "processors", template, pipeline.processors)
    group.start()
    return group


def _drain(cluster: Cluster, topic: str, group: ProcessorGroup, scenario: ScenarioPlan, partitions: int, load_ended: float, run: RunDir) -> PipelineEvidence:
    """Let the processors of `topic` consume until their group committed every input partition to
    its end (or `DRAIN_S` passed), then stop them; what they did, for the entry."""
    pipeline = scenario.pipeline
    assert pipeline is not None
    ends = input_ends(cluster, topic, partitions)
    committed = group.drain(cluster.bootstrap_servers, ends, DRAIN_S)
    done = all(committed.get(p, -1) >= end for p, end in ends.items())
    drain_s = time.time() - load_ended if done else None
    exits = group.stop()
    return PipelineEvidence(
        style=pipeline.style, processors=pipeline.processors, group_protocol=pipeline.group_protocol, group_id=group.template.group_id,
        output_topic=group.template.output_topic, logs=run.relative(group.folder), ends=ends, committed=committed, drain_s=drain_s, exits=exits,
    )


def _drain_all(
    cluster: Cluster, processors: Mapping[str, ProcessorGroup], pipelines: Mapping[str, ScenarioPlan], partitions: int, load_ended: float,
    run: RunDir,
) -> dict[str, PipelineEvidence]:
    """`_drain` of every pipeline of the group at once (each stops its processors as soon as its own
    group committed every input, while the others still drain): by input topic."""
    if not pipelines:
        return {}
    with ThreadPoolExecutor(len(pipelines), thread_name_prefix="drain") as pool:
        futures = {
            topic: pool.submit(_drain, cluster, topic, processors[topic], scenario, partitions, load_ended, run) for topic, scenario in pipelines.items()
        }
    return {topic: future.result() for topic, future in futures.items()}


def input_ends(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """The end offset (high watermark) of each partition of `topic`."""
    consumer = Consumer({"bootstrap.servers": cluster.direct_bootstrap_servers, "group.id": "acklab-ends", "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def replica_assignment(
    brokers: Sequence[int], partitions: int, replication_factor: int, index: int, controller: int, targeted: Collection[int]
) -> list[list[int]]:
    """The replicas of each partition of group `index`'s topics, rotated by the index so that leaders
    spread over a run; the rotation skips any that would make `controller` (the active KRaft
    controller) the leader of a `targeted` partition (a leader fault's target). A leader fault then
    measures a leader's failover alone: a leader that is also the controller is fenced only once a new
    controller is elected, which can outlast the fault's window on two cores (killing the controller
    is controller-kill's case)."""
    count = len(brokers)
    rotations = [
        [[brokers[(p + shift + r) % count] for r in range(replication_factor)] for p in range(partitions)]
        for shift in range(index, index + count)
    ]
    # With no such rotation (e.g. one broker), the index's.
    return next((a for a in rotations if all(a[p][0] != controller for p in targeted)), rotations[0])


def planted_counts(
    cluster: Cluster, outcome: FaultOutcome, topics: list[str], faults: set[str], transactional: Mapping[str, Path] | None = None,
) -> dict[str, dict[str, int | None]]:
    """Per topic, what the planting faults of the schedule (`faults`, `acklab.nemesis.faults.PLANTING`)
    planted in it, by the manifest field each names (`Plants.column`): the records of its log's
    entries whose broker answer was NONE (planted-loss: every swallowed entry, none is answered by a
    broker), or None if the broker's answer to any entry of the topic never came. Entries name a
    topic by name, or by id from produce v13.

    A transactional producer's swallowed records are a loss only if their transaction committed (an
    aborted one's are invisible to read_committed readers, whether stored or not): for the topics of
    `transactional` (topic -> its scenario's send log) planted-loss counts the swallowed records of
    committed transactions only (`committed_swallowed`)."""
    planting = {fault: PLANTING[fault] for fault in faults if fault in PLANTING}
    logs = {fault: [entry for event in outcome.timeline for entry in getattr(event, plants.log)] for fault, plants in planting.items()}
    ids = {}
    if any(logs.values()):
        with cluster.admin() as admin:
            ids = admin.topic_ids(topics)
    counts: dict[str, dict[str, int | None]] = {topic: {} for topic in topics}
    for topic in topics:
        for fault, plants in planting.items():
            mine = [entry for entry in logs[fault] if entry["topic"] in (topic, ids.get(topic))]
            known = all(entry.get("error", "NONE") is not None for entry in mine)
            counts[topic][plants.column] = sum(e["records"] for e in mine if e.get("error", "NONE") == "NONE") if known else None
            if fault == PLANTED_LOSS and topic in (transactional or {}) and mine:
                counts[topic][plants.column] = committed_swallowed((transactional or {})[topic], mine)
    return counts


def committed_swallowed(send_log: Path, swallowed: list[dict]) -> int | None:
    """Of the `swallowed` entries of one topic (partition, made-up base offset, records), the records
    whose transaction committed: per entry, the send log's messages acked at the entry's made-up
    offsets, all acked in a committed transaction (none aborted, none of unknown outcome: those are
    not acked in the log) or all not. An entry none of whose offsets the log holds counts 0 (the
    client never took those records as acked: e.g. purged by an abort). None when the log holds some
    of an entry's offsets only, or its transaction committed for some of them only: what was planted
    is then unknown."""
    table = pq.read_table(send_log, columns=["partition", "offset", "state", "aborted"])
    partition, offset = table["partition"].to_numpy(zero_copy_only=False), table["offset"].to_numpy(zero_copy_only=False)
    committed = np.asarray(pc.and_(pc.equal(table["state"], "acked"), pc.invert(table["aborted"])).to_numpy(zero_copy_only=False))
    total = 0
    for entry in swallowed:
        mine = (partition == entry["partition"]) & (offset >= entry["base_offset"]) & (offset < entry["base_offset"] + entry["records"])
        if not mine.any():
            continue
        if int(mine.sum()) != entry["records"] or len(set(committed[mine].tolist())) != 1:
            return None
        total += entry["records"] if committed[mine][0] else 0
    return total


@dataclass(frozen=True)
class Hanging:
    """A partition whose last stable offset stayed below its high watermark, and the open
    transactions its leader reports there (or why they could not be described)."""

    last_stable: int
    high_watermark: int
    owners: str = ""

    def detail(self, partition: int) -> str:
        owners = f" ({self.owners})" if self.owners else ""
        return f"partition {partition}: last stable offset {self.last_stable} < high watermark {self.high_watermark}{owners}"


def open_transactions(cluster: Cluster, scenarios: dict[str, ScenarioPlan], partitions: int) -> dict[str, dict[int, Hanging] | str]:
    """For each topic of a transactional scenario: its partitions whose last stable offset is still
    below the high watermark once every transaction of the load has outlived its
    transaction.timeout.ms and the coordinator's cleanup (`HANGING_MARGIN_S`): hanging transactions,
    which stall read_committed readers for good, each with the producer id and epoch whose
    transaction is open there. `{}` for a topic where every transaction ended; a string saying why
    for a topic whose offsets could not be read."""
    if not scenarios:
        return {}
    timeout_s = max(s.profile.transaction.timeout_ms for s in scenarios.values() if s.profile.transaction) / 1000
    deadline = time.monotonic() + timeout_s + HANGING_MARGIN_S
    found: dict[str, dict[int, tuple[int, int]] | str] = {}
    with cluster.admin(timeout_s=5) as admin:
        while True:
            for topic in scenarios:
                try:
                    found[topic] = admin.unstable(topic, partitions)
                except Exception as exc:  # kept if it lasts: that scenario's evidence is then incomplete
                    found[topic] = f"last stable offsets not readable: {exc}"
            if all(open_ == {} for open_ in found.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    return {
        topic: offsets if isinstance(offsets, str) else {p: Hanging(lso, hwm, _owners(cluster, topic, p)) for p, (lso, hwm) in offsets.items()}
        for topic, offsets in found.items()
    }


def _owners(cluster: Cluster, topic: str, partition: int) -> str:
    try:
        return "; ".join(map(str, cluster.open_transactions(topic, partition))) or "no open transaction described"
    except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as exc:  # the hang stays counted, its owner undescribed
        return f"open transactions not described: {exc}"


class _GroupProgress:
    """Sums the progress of a group's loads and reports it about once a second."""

    def __init__(self, loads: int, sink: Progress | None) -> None:
        self._totals = [(0, 0, 0)] * loads
        self._sink = sink
        self._lock = threading.Lock()
        self._next = 0.0

    def of(self, n: int) -> Progress | None:
        if self._sink is None:
            return None

        def report(sent: int, acked: int, failed: int) -> None:
            with self._lock:
                self._totals[n] = (sent, acked, failed)
                now = time.monotonic()
                if now >= self._next:
                    self._next = now + 0.9
                    self._sink(*(sum(column) for column in zip(*self._totals, strict=True)))  # type: ignore[misc]

        return report


def _effect_began_after(event: FaultEvent) -> float:
    """The earliest time the fault's effect may have begun (0 if it never showed)."""
    if event.effective_after is not None:
        return event.effective_after
    return event.effective_at or 0.0


def _entry(
    plan: RunPlan,
    scenario: ScenarioPlan,
    topic: str,
    result: LoadResult,
    outcome: FaultOutcome,
    unplanned: str | None,
    run: RunDir,
    hanging: dict[int, Hanging] | str | None = None,
    planted: Mapping[str, int | None] | None = None,
    pipeline: PipelineEvidence | None = None,
    topics: int = 1,
) -> ScenarioEntry:
    """The scenario's manifest entry (`topics`: how many topics its load spread over, its own topic
    `topic` first): what was planned, what the load saw, what the fault did,
    (transactional scenarios) the partitions left with a hanging transaction (`open_transactions`),
    and (planting faults) what the proxy planted in its topic (`planted_counts`).

    Evidence is incomplete when the load did not send what it planned (`load_shortfall`), when a
    fault started after the load ended, or was still seen without its effect after it (an effect
    first seen just after the load's end may have begun during the load: only a look that missed
    it bounds it), when a leader changed during
    a load whose schedule moves no leader (`unplanned`), or when the last stable offsets of a
    transactional scenario could not be read."""
    late = [e for e in outcome.timeline if max(e.started, _effect_began_after(e)) > result.ended]
    incomplete_reason = load_shortfall(result)
    if isinstance(hanging, str):
        incomplete_reason = hanging
    if late:
        incomplete_reason = f"fault {late[0].fault} started or took effect after the load ended"
    if unplanned is not None:
        incomplete_reason = f"unplanned leader change during the load ({unplanned}); no fault of the schedule moves leaders"
    log.info(
        "scenario %s: sent=%d acked=%d failed=%d unknown=%d errors=%s; fault: %s",
        scenario.name, result.sent, result.acked, result.failed, result.unknown, result.errors, outcome.effect,
    )
    files = run.scenario(scenario.name)
    return ScenarioEntry(
        **planned_fields(plan, scenario),
        client_version=result.client_version,
        librdkafka_version=result.librdkafka_version,
        topic=topic,
        topics=scenario_topics(topic, topics) if topics > 1 else [],
        send_log=run.relative(files.send_log),
        load_started=result.started,
        load_ended=result.ended,
        planned=result.planned,
        delivery_errors=result.errors,
        partitioner=scenario.profile.partitioner,
        producers=(scenario.load or plan.load).producers,
        transactional=scenario.profile.transaction is not None,
        aborted=result.aborted,
        stop_reasons=result.stop_reasons,
        fatal_error="; ".join(f"{p}: {e}" for p, e in sorted(result.fatal_errors.items())) or None,
        hanging_partitions=len(hanging) if isinstance(hanging, dict) else None,
        hanging_detail="; ".join(h.detail(p) for p, h in hanging.items())
        if isinstance(hanging, dict) and hanging else None,
        **(planted or {}),
        pipeline=pipeline,
        producer_stats={"path": run.relative(files.stats), **result.stats},
        fault_timeline=[FaultRecord.model_validate(event) for event in outcome.timeline_dicts()],
        fault_effective=outcome.effective and not late,
        fault_effect=outcome.effect,
        evidence_complete=incomplete_reason is None,
        incomplete_reason=incomplete_reason,
    )


def planned_fields(plan: RunPlan, scenario: ScenarioPlan) -> dict[str, Any]:
    """The fields of a scenario's manifest entry that the plan decides, before anything runs."""
    return {
        "scenario": scenario.name,
        "profile": scenario.profile.name,
        "producer_config": families.of(scenario.client).config(scenario.profile),
        "client_family": scenario.client.family,
        "fault": scenario.fault,
        "guarantee": str(scenario.expected.guarantee),
        "guarantee_reason": scenario.expected.reason,
        "expectations": [e.as_dict() for e in scenario.expected.expectations],
        "beliefs": list(scenario.beliefs),
        "transaction_version": scenario.expected.transaction_version or None,
        "partitions": plan.topology.partitions,
        "control": scenario.control,
    }


def load_shortfall(result: LoadResult) -> str | None:
    """Why a load's evidence falls short of its plan, or None: messages never sent (other than
    those a fatal error failed, which are a verdict, not a gap), refused by `produce()`, or
    without a delivery report."""
    gaps = []
    if result.unsent:
        why = "; ".join(f"{p}: {r}" for p, r in sorted(result.stop_reasons.items())) or "no reason recorded"
        gaps.append(f"sent {result.sent} of {result.planned} planned messages ({why})")
    if result.refused:
        errors = ", ".join(f"{name} x{count}" for name, count in sorted(result.errors.items()))
        gaps.append(f"produce() refused {result.refused} messages ({errors})")
    if result.unknown:
        gaps.append(f"{result.unknown} messages of unknown outcome (no delivery report, or a transaction whose outcome was never learned)")
    return "; ".join(gaps) or None

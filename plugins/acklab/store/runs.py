"""The run store: the only code that knows a run folder's layout, and the manifest's typed models.

A run lives in `<runs>/<run_id>/` (`acklab.base.paths.runs_dir()`); everything a verdict needs is in it,
so a run can be re-audited after its cluster is gone. Other modules ask a `RunDir` (or a
`ScenarioDir`) for paths and never spell them out. docs/evidence.md is generated from `LAYOUT`, the
models below and `acklab.store.schemas`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from acklab.base.maven import DEFAULT_KAFKA_VERSION
from acklab.base.paths import runs_dir

M = TypeVar("M", bound=BaseModel)

# Each path of a run folder, relative to it, and what it holds (the layout section of docs/evidence.md).
LAYOUT: tuple[tuple[str, str], ...] = (
    ("plan.json", "the validated plan (`acklab.plan.planner.RunPlan`: params, topology, client, load, scenarios with their expectations): "
     "made once, by the plan task or the CLI, before any broker starts; every later step reads it"),
    ("manifest.json", "the plan and what happened: one entry per scenario (below); written by `collect` once every group ended"),
    ("scenarios/<scenario>/entry.json", "the scenario's manifest entry, written by its group when it ends"),
    ("scenarios/<scenario>/send_log.parquet", "every planned message's fate (send log)"),
    ("scenarios/<scenario>/producer_stats.parquet", "the client's statistics sampled during the load (`acklab.store.schemas.PRODUCER_STATS`)"),
    ("scenarios/<scenario>/producers/p<n>.{log,json}", "each producer process's log and counts"),
    ("scenarios/<scenario>/processors/processor-<i>.<n>.{json,jsonl,stderr}", "a pipeline's processor instance i, incarnation n: its job, its log (`acklab.workload.processing`), its stderr"),
    ("scenarios/<scenario>.attempt-<n>/", "an earlier run of the scenario whose evidence was incomplete, so its group ran it again: the same files, kept, not audited"),
    ("cluster/", "the cluster: `cluster.json` (pids, ports, owner), node folders with their logs (data removed at teardown)"),
    ("shares.json", "a run in shares (`acklab.orchestration.shares`): each share's groups, the attempt gathered (null: none finished, its "
     "scenarios are incomplete), the attempts that never finished, and the evidence store they were published to"),
    ("shares/share-<k>/cluster/", "a run in shares: the cluster of share k's gathered attempt (its nodes' logs)"),
    ("audit/topic_records.parquet", "every record the audit read from the scenario topics (a run in shares: one file per share, "
     "each read by its share before its cluster went)"),
    ("audit/pipeline_records.parquet", "every committed output record of the pipelines' output topics (`acklab.store.schemas.PIPELINE_OUTPUT_RECORDS`)"),
    ("audit/outcomes.parquet", "one row per message (all scenarios'): its outcome class and flags"),
    ("audit/matrix.parquet, audit/matrix.json", "the delivery matrix: one row per scenario"),
    ("result.json", "the verdict: status per scenario, regressions, paths of the matrix and reports"),
    ("results.json", "the run's results for CI systems and scripts: its status, negative controls and each row with its verdict and failed "
     "expectations (`acklab.report.ci_results.RunResults`, below)"),
    ("junit.xml", "the same as JUnit XML: a testsuite for the run's (Kafka, client) pair, a testcase per scenario and per negative control"),
    ("report/index.html", "the HTML report (matrix, model, verdicts) with `heatmap.png` and `timeline-<scenario>.png`"),
    ("dags-test.log", "`make bench-matrix` only: the output of `airflow dags test`"),
    ("run.log", "`acklab run` only: everything logged during the run, the libraries' logging included (the console shows acklab's)"),
)
HISTORY_FILE = "history.sqlite"  # in the runs root: every validated run's rows and verdicts
FIELD_NOTES_DIR = "field-notes"  # FieldNotesDir folders, beside the runs
COMPARISONS_DIR = "comparisons"  # in the runs root: version comparisons, one folder each
KNOWN_BUGS_DIR = "known-bugs"  # in the runs root: the known-bugs page (index.html, known-bugs.json)
REPROS_DIR = "repros"  # in the runs root: `acklab repro` folders, one per red row or bug preset
STORE_DIR = "evidence-store"  # in the runs root: the default evidence store (`acklab.store.evidence_store`)
EXPLORATIONS_DIR = "explorations"  # in the runs root: `acklab explore` runs, one folder each (ExplorationDir)


def known_bugs_dir() -> Path:
    return runs_dir() / KNOWN_BUGS_DIR


def repros_dir() -> Path:
    return runs_dir() / REPROS_DIR


class WithheldBatch(BaseModel):
    """An idempotent producer's record batch in a withheld produce request."""

    topic: str = Field(description="topic name (or topic id, hex, from produce v13)")
    partition: int = Field(description="partition it writes")
    producer_id: int = Field(description="the record batch's producer id")
    producer_epoch: int = Field(description="its producer epoch")
    base_sequence: int = Field(description="its first record's sequence number")


class WithheldRequest(BaseModel):
    """A request a hold (`request-hold`, `withhold-replay`) kept from the broker, and what became of it."""

    api: str = Field(description="request type, e.g. Produce")
    correlation_id: int
    queued: bool = Field(description="held only because an earlier request of its connection was")
    held_at: float = Field(description="epoch seconds it was withheld")
    released_at: float | None = Field(None, description="epoch seconds it was replayed to the broker (null: never, its broker connection closed)")
    transactional_id: str | None = Field(None, description="produce: the producer's transactional id")
    batches: list[WithheldBatch] = Field(default_factory=list, description="produce: its idempotent batches")
    answer: str | None = Field(None, description="the broker's answer to the replay (produce: per partition), e.g. `t-0: INVALID_TXN_STATE`")
    client_gone: bool = Field(False, description="the client had closed the connection: the answer reached no one")


class SwallowedPartition(BaseModel):
    """Records of one partition of a produce request that `planted-loss` answered as appended in the
    broker's name and never forwarded: acked in the client, stored nowhere."""

    topic: str = Field(description="topic name (or topic id, hex, from produce v13)")
    partition: int
    records: int = Field(description="records in its record batches")
    base_offset: int = Field(description="the offset the proxy made up for the first of them (the rest follow it)")
    producer_id: int = Field(-1, description="the batch's producer id (-1: not idempotent)")
    producer_epoch: int = Field(-1)
    base_sequence: int = Field(-1)
    at: float = Field(description="epoch seconds it was swallowed")
    answered: bool = Field(description="the proxy answered it (false with acks=0: no answer is expected)")


class PlantedPartition(BaseModel):
    """Records of one partition of a produce request that reached the broker and that a planting
    fault tampered with: `planted-duplicate` sent it to the broker a second time (the client sent it
    once and was answered for the first copy only), `planted-offset` shifted the offset its answer
    reported to the client, `planted-misroute` had the broker append it to another partition (`to`)
    while the client's answer names its own. The broker's answer says what was planted."""

    topic: str = Field(description="topic name (or topic id, hex, from produce v13)")
    partition: int
    records: int = Field(description="records in its record batches")
    at: float = Field(description="epoch seconds the proxy acted on it")
    answered: bool = Field(description="the broker answered it (false: what was planted is unknown)")
    error: str | None = Field(None, description="the broker's answer for this partition (NONE: appended, so planted)")
    base_offset: int | None = Field(
        None,
        description="the offset the broker appended it at (planted-duplicate: the copy's; planted-offset: the real one, before the shift; "
        "planted-misroute: in partition `to`)",
    )
    to: int | None = Field(None, description="planted-misroute: the partition the broker appended it to (null for the other faults)")


class ReorderedPartition(BaseModel):
    """One partition written by both requests of a pair planted-reorder swapped: the held request
    (A) was forwarded right behind the next one of its connection (B), so the broker appended B's
    records first. The answers to both say what was planted."""

    topic: str = Field(description="topic name (or topic id, hex, from produce v13)")
    partition: int
    held_records: int = Field(description="records of A in the partition")
    records: int = Field(description="records of A whose key is also a key of B's records there: those stored after a later record of their key")
    at: float = Field(description="epoch seconds the pair was forwarded")
    answered: bool = Field(description="both answers came (false: what was planted is unknown)")
    error: str | None = Field(
        None,
        description="NONE: both appended, B first (the records are planted); else why not; null: an answer could not be read, or A failed "
        "(its retry may land late: unknown)",
    )
    a_offset: int | None = Field(None, description="the offset the broker appended A's records of the partition at")
    b_offset: int | None = Field(None, description="the offset the broker appended B's records of the partition at")


class WriteStall(BaseModel):
    """One stall of one client connection under stall-write: the proxy read nothing of it from
    `stalled_at` to `resumed_at`. What the client had written by then and the proxy had not passed
    on waited: the part of a request the proxy had read (`pending_read` of `pending_size` bytes)
    and the bytes still in the kernel's receive queue (`queued`); whatever more the client meant to
    send stayed in its own socket buffer or unwritten."""

    client_port: int = Field(description="the client's port of the connection")
    stalled_at: float = Field(description="epoch seconds the proxy stopped reading it")
    resumed_at: float = Field(description="epoch seconds it read it again")
    pending_size: int | None = Field(description="the size of the request in progress, its 4-byte size included (null: its size had not arrived)")
    pending_read: int = Field(description="bytes of that request the proxy had read when it stopped")
    queued: int = Field(description="bytes waiting in the proxy's kernel receive queue when it read again")


class Intervention(BaseModel):
    """What a processor fault did to one pipeline's processor instance (`processor-kill`, `zombie`)."""

    topic: str = Field(description="the pipeline's input topic (its scenario's topic)")
    kind: str = Field(description="processor-kill or zombie")
    instance: int = Field(description="the processor instance")
    incarnation: int = Field(description="its incarnation hit (a kill starts incarnation + 1)")
    txn: int = Field(description="the batch (transaction) it was in at its point")
    generation: int = Field(description="the group generation (member epoch under group.protocol=consumer) of that batch")
    point_at: float = Field(description="epoch seconds it logged its point and stopped itself")
    killed_at: float | None = Field(None, description="processor-kill: when it was killed (SIGKILL)")
    restarted_at: float | None = Field(None, description="processor-kill: when its next incarnation started")
    moved_on: dict[str, Any] | None = Field(None, description="zombie: the other instance's assignment that took its partitions (generation, instance, t)")
    resumed_at: float | None = Field(None, description="zombie: when it was resumed (SIGCONT)")


class FaultRecord(BaseModel):
    """One applied fault as the manifest records it (`acklab.nemesis.events.FaultEvent`)."""

    fault: str = Field(description="catalog name")
    target: str = Field("", description="what it hit, e.g. `broker:2 (leader:0)`, or `node 1 (leader:0); links 1<->2, 1<->3` for a link fault")
    action: str = Field("", description="kill, stop, pause, stop, the proxy action, or cut / drop <share> (link faults)")
    started: float | None = Field(None, description="epoch seconds the fault was applied")
    ended: float | None = Field(None, description="epoch seconds it was undone (null: never)")
    effect: str = Field("", description="what the cluster showed, or why nothing was seen")
    effective: bool = Field(False, description="its effect was seen")
    effective_at: float | None = Field(None, description="when the effect was first seen")
    effective_after: float | None = Field(
        None, description="the effect began after this: when the last look that did not see it began (or the fault started)"
    )
    counts: dict[str, int] = Field(default_factory=dict, description="proxy counter deltas during the fault, or a link fault's dropped_packets")
    withheld: list[WithheldRequest] = Field(default_factory=list, description="hold faults: each request withheld")
    swallowed: list[SwallowedPartition] = Field(default_factory=list, description="planted-loss: each partition of a request swallowed")
    duplicated: list[PlantedPartition] = Field(default_factory=list, description="planted-duplicate: each partition of a request sent twice")
    shifted: list[PlantedPartition] = Field(default_factory=list, description="planted-offset: each partition of an answer shifted")
    misrouted: list[PlantedPartition] = Field(default_factory=list, description="planted-misroute: each partition of a request moved to another")
    reordered: list[ReorderedPartition] = Field(default_factory=list, description="planted-reorder: each partition of a swapped pair of requests")
    write_stalls: list[WriteStall] = Field(default_factory=list, description="stall-write: each stall of each client connection")
    interventions: list[Intervention] = Field(default_factory=list, description="processor faults: each processor instance hit")


class GroupTiming(BaseModel):
    """The scenario group (a fault's profiles, run side by side) and its wall time."""

    index: int = Field(description="the group's position in the plan")
    started: float = Field(description="epoch seconds the group started (topics, producers)")
    ended: float = Field(description="epoch seconds it ended (after the health gate)")
    scenarios: int = Field(description="scenarios run side by side in it")


class EarlierAttempt(BaseModel):
    """A first run of the scenario whose evidence was incomplete; its group ran it again."""

    topic: str = Field(description="the attempt's own topic")
    evidence: str = Field(description="its folder, relative to the run folder")
    incomplete_reason: str | None = Field(None, description="why its evidence was incomplete")
    fault_effect: str | None = Field(None, description="what its faults did")
    load_started: float | None = Field(None, description="epoch seconds of its first send")


class PipelineEvidence(BaseModel):
    """A pipeline scenario's processing: what ran and where its evidence is (`acklab.workload.processing`)."""

    style: str = Field(description="processing style: eos, at-least-once, at-most-once, eos-naive")
    processors: int = Field(description="processor instances")
    group_protocol: str = Field("classic", description="the processors' consumer group protocol")
    group_id: str = Field(description="their consumer group")
    output_topic: str = Field(description="the topic they produce to")
    logs: str = Field(description="folder of the processors' jobs, logs and stderr, relative to the run folder")
    ends: dict[int, int] = Field(default_factory=dict, description="input partition -> its end offset when the drain began")
    committed: dict[int, int] = Field(default_factory=dict, description="input partition -> the group's committed offset after the drain (-1: none)")
    drain_s: float | None = Field(None, description="seconds from the load's end until the group had committed every input (null: it never did)")
    exits: dict[str, int | None] = Field(default_factory=dict, description="`<instance>.<incarnation>` -> exit status at the stop (null: killed after the stop timeout)")


class ScenarioEntry(BaseModel):
    """What was planned for one scenario, what its load saw and what its faults did."""

    model_config = ConfigDict(extra="ignore")
    scenario: str = Field(description="`<profile>__<fault>`")
    profile: str = Field("", description="producer profile")
    producer_config: dict[str, Any] = Field(default_factory=dict, description="the client's configuration used (its family's property names)")
    client_family: str = Field("librdkafka", description="the producer client family (`acklab.workload.families`)")
    client_version: str | None = Field(None, description="the producer client's version (librdkafka family: confluent-kafka's)")
    librdkafka_version: str | None = Field(None, description="the librdkafka it bundles")
    fault: str = Field("", description="fault (the schedule's label)")
    guarantee: str = Field("", description="the class the model expects")
    guarantee_reason: str | None = Field(None, description="why: the class rule that matched and the settings that decided it")
    expectations: list[dict[str, Any]] | None = Field(None, description="the exact expectations of the row, recorded at plan time")
    beliefs: list[str] = Field(default_factory=list, description="the beliefs (`acklab.model.beliefs`) the scenario tests: findings, not verdicts")
    transaction_version: int | None = Field(
        None, description="the transaction protocol its transactions run (1, or 2: KIP-890 part 2, a late EndTxn fenced); null: no transactions"
    )
    topic: str | None = Field(None, description="the scenario's own topic")
    topics: list[str] = Field(
        default_factory=list,
        description="every topic its load sent to, its own topic first (`acklab.workload.spec.scenario_topics`); empty: its own topic alone",
    )
    partitions: int | None = Field(None, description="its partition count")
    send_log: str | None = Field(None, description="path of the send log, relative to the run folder")
    load_started: float | None = Field(None, description="epoch seconds of the first send")
    load_ended: float | None = Field(None, description="epoch seconds the last producer finished (flush included)")
    planned: int | None = Field(None, description="send-log rows: the audit refuses a send log with another count")
    delivery_errors: dict[str, int] = Field(default_factory=dict, description="failed messages per error name of the client family")
    partitioner: str | None = Field(None, description="the profile's partitioner")
    producers: int | None = Field(None, description="producer processes")
    transactional: bool = Field(False, description="transactional profile")
    aborted: int = Field(0, description="messages in aborted transactions")
    stop_reasons: dict[str, str] = Field(default_factory=dict, description="producer -> why it stopped before its plan (other than its clock)")
    fatal_error: str | None = Field(None, description="the producers' fatal errors, `p<n>: NAME: message`")
    hanging_partitions: int | None = Field(
        None, description="transactional: partitions whose last stable offset stayed below the high watermark after every transaction timed out (hanging transactions); null otherwise"
    )
    hanging_detail: str | None = Field(
        None, description="each such partition with its last stable offset, high watermark and the open transaction's producer id, epoch and start offset"
    )
    planted_lost: int | None = Field(
        None,
        description="planted-loss: records of the scenario's topic the proxy answered as appended and never forwarded (the swallowed entries of its timeline, summed; "
        "a transactional producer's only where the send log shows their transaction committed); null without that fault, or when the log does not match an entry",
    )
    planted_duplicates: int | None = Field(
        None,
        description="planted-duplicate: records of the scenario's topic the proxy sent to the broker a second time and the broker "
        "appended again (the duplicated entries of its timeline answered NONE, summed); null without that fault, or when a copy's "
        "answer never came (what it did is unknown)",
    )
    planted_offset_mismatch: int | None = Field(
        None,
        description="planted-offset: records of the scenario's topic whose acked offset the proxy shifted (the shifted entries of "
        "its timeline answered NONE, summed); null without that fault, or when an answer never came",
    )
    planted_reordered: int | None = Field(
        None,
        description="planted-reorder: records of the scenario's topic the proxy had the broker store after a later record of their key "
        "(the reordered entries of its timeline appended swapped, summed); null without that fault, or when an answer never came or "
        "could not be read",
    )
    planted_misrouted: int | None = Field(
        None,
        description="planted-misroute: records of the scenario's topic the proxy had the broker append to another partition than the "
        "client sent them to (the misrouted entries of its timeline answered NONE, summed); null without that fault, or when an answer "
        "never came or could not be read",
    )
    control: bool = Field(False, description="a negative control of the run: its planted anomaly must be counted exactly, or the run is invalid")
    pipeline: PipelineEvidence | None = Field(None, description="a pipeline scenario: its processing (below); null for a producer scenario")
    producer_stats: dict[str, Any] = Field(default_factory=dict, description="path of the statistics, sample count, counter totals, gauge maxima")
    fault_timeline: list[FaultRecord] = Field(default_factory=list, description="every applied fault (below)")
    fault_effective: bool | None = Field(None, description="every fault took effect while the load ran")
    fault_effect: str | None = Field(None, description="what the faults did, as the timeline's effects")
    disturbances: list[str] = Field(
        default_factory=list,
        description="unplanned during a load whose schedule moves no leader: a leader change (the evidence is then incomplete), "
        "an ISR shrink, a controller move, each with when (not watched under faults that move leaders)",
    )
    evidence_complete: bool = Field(True, description="false: the verdict is incomplete whatever the counts")
    incomplete_reason: str | None = Field(None, description="why the evidence is incomplete")
    group: GroupTiming | None = Field(None, description="the scenario group it ran in (below)")
    earlier_attempts: list[EarlierAttempt] = Field(
        default_factory=list, description="runs of this scenario whose evidence was incomplete, so its group ran it again (below); the entry is the last run's"
    )

    @property
    def load_topics(self) -> list[str]:
        """Every topic the scenario's load sent to (none without a topic)."""
        return self.topics or ([self.topic] if self.topic else [])


class Manifest(BaseModel):
    """The run: where its cluster was, on what topology, with which params, and every scenario."""

    model_config = ConfigDict(extra="ignore")
    run_id: str = Field(description="the run folder's name")
    bootstrap_servers: str | None = Field(None, description="the DIRECT listeners the audit reads from")
    topology: dict[str, Any] = Field(default_factory=dict, description="the topology spec (`acklab.cluster.topology.Topology`)")
    params: list[dict[str, Any]] = Field(default_factory=list, description="the run params of each plan run in this folder")

    @property
    def client_family(self) -> str:
        """The producers' client family ('' if no scenario, or mixed: ', '-joined)."""
        return ", ".join(sorted({s.client_family for s in self.scenarios}))

    @property
    def client_version(self) -> str:
        """The producers' confluent-kafka version ('' if unrecorded, or mixed: ', '-joined)."""
        return ", ".join(sorted({s.client_version for s in self.scenarios if s.client_version}))

    @property
    def kafka_version(self) -> str:
        """The brokers' Apache Kafka version (the topology's)."""
        return str(self.topology.get("kafka_version") or DEFAULT_KAFKA_VERSION)

    @property
    def preset(self) -> str | None:
        """The preset the run's params came from, if any."""
        return next((p["preset"] for p in self.params if p.get("preset")), None)

    scenarios: list[ScenarioEntry] = Field(default_factory=list, description="one entry per scenario (below)")

    def entry(self, scenario: str) -> ScenarioEntry:
        return next(s for s in self.scenarios if s.scenario == scenario)


@dataclass(frozen=True)
class ScenarioDir:
    """One scenario's folder (also used alone, e.g. by the load benchmark)."""

    root: Path

    @property
    def entry(self) -> Path:
        return self.root / "entry.json"

    @property
    def send_log(self) -> Path:
        return self.root / "send_log.parquet"

    @property
    def stats(self) -> Path:
        return self.root / "producer_stats.parquet"

    @property
    def producers(self) -> Path:
        return self.root / "producers"

    def producer_file(self, producer: str, suffix: str) -> Path:
        """A producer process's own file: its log (`.log`), counts (`.json`), send-log and statistics parts."""
        return self.producers / f"{producer}{suffix}"


@dataclass(frozen=True)
class AuditDir:
    """The audit's outputs (a run's `audit/`, or any folder a re-audit writes to)."""

    root: Path

    @property
    def topic_records(self) -> Path:
        return self.root / "topic_records.parquet"

    @property
    def pipeline_records(self) -> Path:
        """The committed output records of every pipeline scenario (`PIPELINE_OUTPUT_RECORDS`)."""
        return self.root / "pipeline_records.parquet"

    @property
    def outcomes(self) -> Path:
        return self.root / "outcomes.parquet"

    @property
    def matrix_parquet(self) -> Path:
        return self.root / "matrix.parquet"

    @property
    def matrix_json(self) -> Path:
        return self.root / "matrix.json"


@dataclass(frozen=True)
class ReportDir:
    """A run's HTML report and its charts."""

    root: Path

    @property
    def index(self) -> Path:
        return self.root / "index.html"

    @property
    def heatmap(self) -> Path:
        return self.root / "heatmap.png"

    def timeline(self, scenario: str) -> Path:
        return self.root / f"timeline-{scenario}.png"


class CiResults:
    """The results a folder keeps for CI systems (`acklab.report.ci_results`): a run's, or a
    comparison's with one entry per (Kafka version, client) pair."""

    root: Path

    @property
    def results_json(self) -> Path:
        return self.root / "results.json"

    @property
    def junit_xml(self) -> Path:
        return self.root / "junit.xml"


@dataclass(frozen=True)
class RunDir(CiResults):
    """One run's folder."""

    root: Path

    @classmethod
    def create(cls) -> RunDir:
        """A fresh folder in the run store: `<runs>/<UTC time>-<random>`."""
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
        path = runs_dir() / run_id
        path.mkdir(parents=True)
        return cls(path)

    @classmethod
    def of_manifest(cls, manifest: Path) -> RunDir:
        return cls(Path(manifest).resolve().parent)

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def cluster(self) -> Path:
        return self.root / "cluster"

    @property
    def shares(self) -> Path:
        return self.root / "shares.json"

    def share_folder(self, share: int) -> Path:
        return self.root / "shares" / f"share-{share}"

    def cluster_folders(self) -> list[Path]:
        """Every cluster folder of the run: its own cluster's, then each gathered share's (a run in
        shares, a version pair), those that exist. Where a check or a repro looks for broker logs."""
        return [folder for folder in (self.cluster, *sorted(self.root.glob("shares/share-*/cluster"))) if folder.is_dir()]

    def scenario(self, name: str) -> ScenarioDir:
        return ScenarioDir(self.root / "scenarios" / name)

    def relative(self, path: Path) -> str:
        """`path` as the manifest records it: relative to the run folder."""
        return str(path.relative_to(self.root))

    @property
    def audit(self) -> AuditDir:
        return AuditDir(self.root / "audit")

    @property
    def matrix_json(self) -> Path:
        return self.audit.matrix_json

    @property
    def report(self) -> ReportDir:
        return ReportDir(self.root / "report")

    @property
    def dags_test_log(self) -> Path:
        return self.root / "dags-test.log"

    @property
    def log(self) -> Path:
        return self.root / "run.log"

    def write_plan(self, plan: BaseModel) -> None:
        """Keep the run's plan; a folder has one plan, written once."""
        if self.plan.exists():
            raise FileExistsError(f"{self.plan} exists: a run folder has one plan")
        write_json(self.plan, plan.model_dump(mode="json"))

    def read_plan(self, model: type[M]) -> M:
        """The run's plan as `model` (`acklab.plan.planner.RunPlan`, a layer above the store)."""
        return model.model_validate_json(self.plan.read_text())

    def read_manifest(self) -> Manifest:
        return Manifest.model_validate_json(self.manifest.read_text())

    def write_manifest(self, manifest: Manifest) -> None:
        write_json(self.manifest, manifest.model_dump(mode="json"))

    def read_entry(self, scenario: str) -> ScenarioEntry:
        return ScenarioEntry.model_validate_json(self.scenario(scenario).entry.read_text())

    def write_entry(self, entry: ScenarioEntry) -> None:
        write_json(self.scenario(entry.scenario).entry, entry.model_dump(mode="json"))

    def read_matrix(self) -> list[dict[str, Any]]:
        return json.loads(self.matrix_json.read_text())

    def read_result(self) -> dict[str, Any]:
        return json.loads(self.result.read_text())

    def write_result(self, result: dict[str, Any]) -> None:
        write_json(self.result, result)


def runs() -> list[RunDir]:
    """Every run folder in the store, oldest first."""
    root = runs_dir()
    others = {COMPARISONS_DIR, FIELD_NOTES_DIR, STORE_DIR}
    return sorted((RunDir(p) for p in root.iterdir() if p.is_dir() and p.name not in others), key=lambda r: r.run_id) if root.exists() else []


def latest_result() -> RunDir | None:
    """The most recently validated run, if any."""
    results = [run for run in runs() if run.result.exists()]
    return max(results, key=lambda run: run.result.stat().st_mtime) if results else None


def history_db() -> Path:
    return runs_dir() / HISTORY_FILE


@dataclass(frozen=True)
class PageDir:
    """A report over several runs, in its own folder of the runs root: `index.html` and a JSON summary."""

    root: Path
    FOLDER: ClassVar[str]
    SUMMARY: ClassVar[str]

    @classmethod
    def named(cls, name: str) -> Self:
        return cls(runs_dir() / cls.FOLDER / name)

    @property
    def index(self) -> Path:
        return self.root / "index.html"

    @property
    def summary(self) -> Path:
        return self.root / self.SUMMARY


class ComparisonDir(PageDir, CiResults):
    """A version comparison: its page, the versions' heatmaps and `comparison.json`."""

    FOLDER = COMPARISONS_DIR
    SUMMARY = "comparison.json"

    def heatmap(self, label: str) -> Path:
        return self.root / f"heatmap-{label}.png"



class FieldNotesDir(PageDir):
    """One field-notes DAG run: its page (every preset's claims and measurements) and `field-notes.json`."""

    FOLDER = FIELD_NOTES_DIR
    SUMMARY = "field-notes.json"


@dataclass(frozen=True)
class ExplorationDir:
    """One `acklab explore`: `exploration.json` (its space, seed, budget, every trial and finding) and a
    maintainer-ready report per confirmed finding (`finding-<n>.md`, beside its repro folder's path)."""

    root: Path

    @classmethod
    def create(cls, seed: int) -> ExplorationDir:
        path = runs_dir() / EXPLORATIONS_DIR / (time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-seed{seed}-{secrets.token_hex(2)}")
        path.mkdir(parents=True)
        return cls(path)

    @property
    def summary(self) -> Path:
        return self.root / "exploration.json"

    def report(self, number: int) -> Path:
        return self.root / f"finding-{number}.md"


def write_json(path: Path, data: object) -> None:
    """Write `data` as JSON through a temp file and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)

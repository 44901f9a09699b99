"""Every fact about each catalog fault, in one place and as pure data: what it does, what it may
target, its options and their bounds, its mechanism, the properties the schedule and the guarantee
model rely on, and what it must do to the guarantees' columns. Adding a fault whose mechanism exists
is one entry of `FAULTS`; a new mechanism is that entry plus its implementation in
`acklab.nemesis.actions` (`MECHANISMS`). A proxy fault's options model is its behaviour's
(`acklab.proxy.behaviours`), never declared here. Nothing here touches a cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.base import Behaviour
from acklab.proxy.behaviours.hold_request import WithholdOptions
from acklab.proxy.codes import ERRORS, PRODUCE

NO_FAULT = "none"
PLANTED_LOSS = "planted-loss"  # the planting faults (`PLANTING`): the run's negative controls
PLANTED_DUPLICATE = "planted-duplicate"
PLANTED_OFFSET = "planted-offset"
PLANTED_MISROUTE = "planted-misroute"
PLANTED_REORDER = "planted-reorder"
TO_LOAD_END_CEILING_S = 6 * 3600.0  # a fault that lasts until the load ends (`FaultSpec.to_load_end`) is undone after this at the latest
TargetKind = Literal["leader", "follower", "controller", "broker", "random-broker", "every-broker", "group-coordinator", "txn-coordinator"]
COORDINATORS: frozenset[TargetKind] = frozenset({"group-coordinator", "txn-coordinator"})  # a pipeline's: its group's, its instance 0's transactions'
ANY_NODE: frozenset[TargetKind] = frozenset({"leader", "follower", "controller", "broker", "random-broker"}) | COORDINATORS
PROXIED: frozenset[TargetKind] = ANY_NODE | {"every-broker"}  # a proxy fault may act on every broker's traffic at once
PARTITION: frozenset[TargetKind] = frozenset({"leader", "follower"})


class NoOptions(BaseModel):
    # Built on first use, not at import: the DAG files import the catalog when they are parsed.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ReplicasDownOptions(NoOptions):
    count: int | None = Field(None, ge=1, description="followers to stop (default: enough to break min.insync)")


class LinkOptions(NoOptions):
    peers: list[int] = Field(default_factory=list, description="node ids at the other end of the cut links (empty = every other node)")


class OneWayOptions(LinkOptions):
    direction: Literal["out", "in"] = Field("out", description="out: the target's packets to its peers are dropped; in: theirs to it")


class LossyLinkOptions(LinkOptions):
    probability: float = Field(0.3, gt=0, lt=1, description="share of the packets dropped, each direction")


class ProcessorOptions(NoOptions):
    instance: int = Field(0, ge=0, description="the processor instance it acts on (0..processors-1)")


class SplitOptions(NoOptions):
    side: list[int] = Field(default_factory=list, description="node ids on the target's side besides it (the rest form the other side)")


# ---- mechanisms: how a fault acts (each has one implementation in `acklab.nemesis.actions`) ----


@dataclass(frozen=True)
class Process:
    """Kill (SIGKILL, restart after the window), stop (SIGTERM, controlled shutdown, start after it)
    or pause (SIGSTOP, SIGCONT after it) the target broker's process."""

    signal: Literal["kill", "stop", "pause"]


@dataclass(frozen=True)
class RollingRestart:
    """Clean restart of every broker in turn, each back in the ISR before the next."""


@dataclass(frozen=True)
class ReplicasDown:
    """Stop followers of the target partition (together) until its ISR is below min.insync.replicas."""


@dataclass(frozen=True)
class Proxy:
    """A rule of the Kafka-aware proxy in front of the target broker's client listener
    (`acklab.proxy.rules.ProxyRule`) applying `behaviour` (`acklab.proxy.behaviours`); effective
    once the proxy counted any of the behaviour's counters."""

    behaviour: Behaviour

    @property
    def action(self) -> str:
        return self.behaviour.name

    @property
    def counters(self) -> tuple[str, ...]:
        return self.behaviour.counters


@dataclass(frozen=True)
class Links:
    """Cut links between nodes (iptables and cgroups; never between clients and nodes). `pairs`:
    the target and its peers both ways (`peers`), the target's packets only one way (`one-way`),
    or every link across the split (`split`). `seen`: the effect looked for, the isolated leader's
    leadership moving (`leader-moved`) or any reaction of the cluster (`reacted`: a broker fenced,
    the leader moved, the ISR shrank, the controller moved)."""

    pairs: Literal["peers", "one-way", "split"] = "peers"
    seen: Literal["leader-moved", "reacted"] = "reacted"


@dataclass(frozen=True)
class ProcessorSignal:
    """Act on a pipeline's processor instance at its point (`acklab.workload.processing`: armed,
    it stops itself between its output and its offsets step): `kill` it (SIGKILL) and start its
    next incarnation after the window (same transactional.id: the restart fences the killed
    epoch and aborts its open transaction at once, instead of waiting for transaction.timeout.ms),
    or keep it paused as a `zombie` until the group has moved on past its generation and the
    window is over, then resume it (SIGCONT)."""

    kind: Literal["kill", "zombie"]


Mechanism = Process | RollingRestart | ReplicasDown | Proxy | Links | ProcessorSignal


@dataclass(frozen=True)
class Effect:
    """What a fault is expected to do to a guarantee's columns when a setting meets it: an efficacy
    expectation of the guarantee model (`acklab.model.guarantees`). A row without it shows the fault
    never met the load, so the scenario is incomplete, never a pass.

    `test` is a predicate over the model's `Setting`; `bounds` are (matrix column, min, max)."""

    name: str
    when: str
    test: Callable[[Any], bool]
    bounds: tuple[tuple[str, float | None, float | None], ...]
    why: str


@dataclass(frozen=True)
class Plants:
    """What a planting fault plants on purpose, which the checker must count exactly: the proxy
    behaviour's evidence log (`log`, also the fault event's field), the manifest and matrix field
    holding the truth (`column`: the records of the log's entries the broker's answer shows planted,
    summed per topic by `acklab.orchestration.execution.planted_counts`), the matrix count that must
    equal it (`counted`), the sentence comparing the two (`sentence`, with `{planted}` and
    `{counted}`), the profile of the run's negative control that plants it (`control_profile`),
    the documented claim the planted anomaly breaks (`claim`: its id and why), the partitions a
    topic needs for it to be planted at all (`min_partitions`: a run whose topology has fewer has no
    control of it) and the keys of its control's producer (`control_keys`; None: the run's `keys`).
    With `control_keys` set, the control's fault targets the leader of the partition its first key
    maps to under the control profile's partitioner (`acklab.workload.partitioners`), not partition
    0's: with one key, every record of the control passes the proxy, in one partition, under one key."""

    log: str
    column: str
    counted: str
    sentence: str
    control_profile: str
    claim: tuple[str, str]
    min_partitions: int = 1
    control_keys: int | None = None


@dataclass(frozen=True)
class FaultSpec:
    """A catalog fault: every fact about it.

    `mechanism`: how it acts (None: the baseline). `bounded`: its effect on a producer ends when its
    window ends (the node is back, the proxy forwards again). `silent`: it swallows requests without
    an answer or a closed connection, so a request lost in flight is noticed only when it times out
    in the client; link cuts are silent too, as a leader cut off from its followers holds acks=all
    requests until they time out. `moves_leaders`: partition leaders may move because of it (in a
    schedule without such a fault a leader change is unplanned). `answers_error`: it answers writes
    with its option `error` (a Kafka error name). `precedes_load`: a step of it may run before the
    load (`FaultStep.before_load`): its action confirms its effect, then lets the producers start
    (`acklab.nemesis.actions.FaultContext.settled`). `needs_followers`: the topology must have
    followers (replication factor 2 or more). `effects`: what it must do to the guarantees' columns.
    `standard`: the daily standard matrix runs it (otherwise it runs when a run names it).
    `to_load_end`: its window lasts from its start until the load has ended (`duration_s` unused), so
    that nothing the fault withholds from a broker is followed by a write the broker would see.
    `plants`: it plants an anomaly the checker must count exactly (`Plants`; the run's negative controls)."""

    name: str
    description: str
    default_target: str | None
    targets: frozenset[TargetKind]
    mechanism: Mechanism | None
    options: type[BaseModel] = NoOptions
    bounded: bool = True
    silent: bool = False
    moves_leaders: bool = False
    answers_error: bool = False
    precedes_load: bool = False
    needs_followers: bool = False
    effects: tuple[Effect, ...] = ()
    standard: bool = True
    to_load_end: bool = False
    plants: Plants | None = None

    @property
    def stops_nodes(self) -> bool:
        """It acts on broker processes (two such faults may not overlap)."""
        return isinstance(self.mechanism, Process | RollingRestart | ReplicasDown)

    @property
    def signals_processors(self) -> bool:
        """It acts on a pipeline's processor processes (two such faults may not overlap)."""
        return isinstance(self.mechanism, ProcessorSignal)

    @property
    def needs_proxy(self) -> bool:
        """It acts through the Kafka-aware proxy in front of the client listeners."""
        return isinstance(self.mechanism, Proxy)

    @property
    def needs_pipeline(self) -> bool:
        """It acts on a pipeline's processors, or by default on a coordinator of one: it runs with
        pipeline scenarios only."""
        return isinstance(self.mechanism, ProcessorSignal) or self.default_target in COORDINATORS

    @property
    def cuts_links(self) -> bool:
        """It cuts links between nodes (`acklab.cluster.links`: iptables and cgroups, so root)."""
        return isinstance(self.mechanism, Links)


def _process(name: str, description: str, target: str, signal: Literal["kill", "stop", "pause"]) -> FaultSpec:
    return FaultSpec(name, description, target, ANY_NODE, Process(signal), moves_leaders=True, precedes_load=True)


def _proxy(
    name: str, description: str, behaviour: str, *, options: type[BaseModel] | None = None, bounded: bool = True, silent: bool = False,
    answers_error: bool = False, precedes_load: bool = False, effects: tuple[Effect, ...] = (), standard: bool = True,
    to_load_end: bool = False,
) -> FaultSpec:
    """A proxy fault applying the behaviour named `behaviour`, configured by its options model (or
    `options`, one of the behaviour's variants)."""
    acts = BEHAVIOURS[behaviour]
    assert options is None or options in acts.option_models, (name, options)
    return FaultSpec(
        name, description, "leader:0", PROXIED, Proxy(acts), options or acts.options, bounded=bounded, silent=silent,
        answers_error=answers_error, precedes_load=precedes_load, effects=effects, standard=standard, to_load_end=to_load_end,
    )


def _planting(name: str, description: str, behaviour: str, plants: Plants, why_planted: str) -> FaultSpec:
    """A proxy fault that plants an anomaly (`Plants`) from its start until the load ends: not in
    the standard matrix; its efficacy expectation is that it planted at least one record in the
    scenario's topic (`why_planted` says what passes untouched)."""
    effect = Effect(f"{name}-planted", name, lambda s: s.has(name), ((plants.column, 1, None),), why_planted)
    return replace(_proxy(name, description, behaviour, standard=False, to_load_end=True, effects=(effect,)), plants=plants)


def _link(
    name: str, description: str, target: str, options: type[BaseModel], mechanism: Links = Links(),
    targets: frozenset[TargetKind] = ANY_NODE,
) -> FaultSpec:
    return FaultSpec(name, description, target, targets, mechanism, options, silent=True, moves_leaders=True)


_GIVES_UP = (
    "the producer gives up a refused write within the window (min(delivery.timeout.ms, retries x retry.backoff.max.ms "
    "+ (retries + 1) x one refused round trip) < its duration)"
)

FAULTS: Mapping[str, FaultSpec] = {
    spec.name: spec
    for spec in (
        FaultSpec(NO_FAULT, "no fault: the baseline", None, frozenset(), None),
        _process("leader-kill", "SIGKILL the partition leader, restart after the duration", "leader:0", "kill"),
        _process("leader-restart", "SIGTERM (controlled shutdown) of the leader, start after the duration", "leader:0", "stop"),
        _process("leader-pause", "SIGSTOP the leader (it keeps its sockets), SIGCONT after the duration", "leader:0", "pause"),
        _process("follower-kill", "SIGKILL an in-sync follower, restart after the duration", "follower:0", "kill"),
        _process("controller-kill", "SIGKILL the active KRaft controller, restart after the duration", "controller", "kill"),
        FaultSpec(
            "group-coordinator-kill", "SIGKILL the broker coordinating a pipeline's consumer group, restart after the duration",
            "group-coordinator", ANY_NODE, Process("kill"), moves_leaders=True, standard=False,
        ),
        FaultSpec(
            "txn-coordinator-kill",
            "SIGKILL the broker coordinating the transactions of a pipeline's processor instance 0, restart after the duration",
            "txn-coordinator", ANY_NODE, Process("kill"), moves_leaders=True, standard=False,
        ),
        FaultSpec(
            "follower-restart", "SIGTERM (controlled shutdown) of an in-sync follower, start after the duration", "follower:0", ANY_NODE,
            Process("stop"), moves_leaders=True, precedes_load=True, standard=False,
        ),
        FaultSpec(
            "processor-kill",
            "SIGKILL a pipeline's processor instance at its point (after its output, before its offsets; at-most-once: the "
            "reverse), start it again after the duration with the same transactional.id",
            None, frozenset(), ProcessorSignal("kill"), ProcessorOptions, standard=False,
            effects=(
                Effect(
                    "processor-kill-redelivers", "processor-kill, processing other than at-most-once",
                    lambda s: s.has("processor-kill") and s.processing not in (None, "at-most-once"),
                    (("redelivered", 1, None),),
                    "The instance dies between its output and its offsets, so the batch it held is consumed again by the "
                    "next owner of its partitions; none consumed again means the kill never met the load.",
                ),
                Effect(
                    "processor-kill-drops", "processor-kill, processing at-most-once",
                    lambda s: s.has("processor-kill") and s.processing == "at-most-once",
                    (("processed_lost", 1, None),),
                    "At-most-once commits the batch's offsets before its output, so the killed batch is never produced.",
                ),
            ),
        ),
        FaultSpec(
            "zombie",
            "pause (SIGSTOP) a pipeline's processor instance at its point until the group has moved on past its generation "
            "(and the duration is over), then resume it: its writes and offset commits must be fenced",
            None, frozenset(), ProcessorSignal("zombie"), ProcessorOptions, standard=False,
        ),
        FaultSpec(
            "rolling-restart", "clean restart of every broker in turn (takes as long as it takes)", None, frozenset(), RollingRestart(),
            bounded=False, moves_leaders=True,
        ),
        FaultSpec(
            "replicas-down", "stop followers until the ISR is below min.insync.replicas", "leader:0", PARTITION, ReplicasDown(),
            ReplicasDownOptions, moves_leaders=True, needs_followers=True,
            effects=(
                Effect(
                    "replicas-down-refusals",
                    f"replicas-down, acks=all, min.insync.replicas >= 2, and {_GIVES_UP}",
                    lambda s: s.acks == "all" and s.min_insync_replicas >= 2 and s.refused_s < s.longest("replicas-down"),
                    (("failed_clean", 1, None),),
                    "With the ISR below min.insync.replicas the leader refuses acks=all writes at once "
                    "(NOT_ENOUGH_REPLICAS), so writes sent during the outage run out of retries and fail cleanly; "
                    "none failing means the outage never met the load.",
                ),
            ),
        ),
        _proxy(
            "ack-loss", "drop produce responses after the broker appended, then close the connection", "drop_response",
            effects=(
                Effect(
                    "ack-loss-duplicates", "ack-loss, acks != 0, no idempotence, retries > 0",
                    lambda s: s.has("ack-loss") and s.acks != "0" and not s.idempotent and s.retries > 0,
                    (("duplicates", 1, None),),
                    "A response dropped after the append makes the producer send a stored batch again.",
                ),
                Effect(
                    "ack-loss-indeterminate", "ack-loss, acks != 0, retries = 0",
                    lambda s: s.has("ack-loss") and s.acks != "0" and s.retries == 0,
                    (("indeterminate", 1, None),),
                    "Without retries, a response dropped after the append reports a stored record as failed.",
                ),
            ),
        ),
        _proxy(
            "request-loss", "drop produce requests before they reach the broker", "drop_request", silent=True,
        ),
        # A response sent at the end of the window is still delayed by delay_s: not bounded by the window.
        _proxy(
            "latency", "delay every response of the broker by delay_s (default 30 s)", "delay_response", bounded=False, precedes_load=True,
        ),
        _proxy(
            "client-partition", "blackhole the broker for clients (replication continues)", "blackhole", silent=True,
        ),
        _proxy(
            "error-inject",
            "answer requests with a broker error (default: produce requests, NOT_ENOUGH_REPLICAS; apis: also FindCoordinator, "
            "InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, OffsetCommit, OffsetFetch, JoinGroup, "
            "SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, with an error each may carry); they never reach the broker "
            "(Metadata: it does, and its answer's topics carry the error)",
            "inject_error", answers_error=True, precedes_load=True,
            effects=(
                Effect(
                    "injected-errors-fail",
                    f"error-inject, acks != 0, not transactional, and the error is non-retriable or {_GIVES_UP}",
                    lambda s: s.has("error-inject")
                    and s.errors_writes
                    and s.acks != "0"
                    and not s.transactional
                    and (s.permanent_error or s.refused_s < s.longest("error-inject")),
                    (("failed_clean", 1, None),),
                    "The proxy answers every write of the window with the error and the broker never sees it, so a "
                    "producer that does not retry it, or runs out of retries, reports writes failed that are absent; "
                    "none failing means the fault never met the load.",
                ),
            ),
        ),
        _proxy(
            "error-after-append",
            "forward produce requests, then report the appended partitions failed (default NOT_ENOUGH_REPLICAS_AFTER_APPEND)",
            "replace_error", answers_error=True,
            effects=(
                Effect(
                    "error-after-append-duplicates", "error-after-append with a retriable error, acks != 0, no idempotence, retries > 0",
                    lambda s: s.has("error-after-append") and s.acks != "0" and not s.idempotent and s.retries > 0 and not s.permanent_error,
                    (("duplicates", 1, None),),
                    "The broker appended the batch but the producer is told it failed with a retriable error, so it "
                    "sends the stored batch again.",
                ),
                Effect(
                    "error-after-append-indeterminate",
                    "error-after-append, acks != 0, not transactional, and the error is non-retriable or retries = 0",
                    lambda s: s.has("error-after-append") and s.acks != "0" and not s.transactional and (s.permanent_error or s.retries == 0),
                    (("indeterminate", 1, None),),
                    "A write the broker appended but reported failed, and that the producer does not retry, is "
                    "stored yet failed in the client. (With bounded retries of a retriable error no bound is set: "
                    "each attempt is a real append, and in a 10 s window librdkafka 2.16 made at most 6 attempts "
                    "per message, so 5 retries were not used up.)",
                ),
            ),
        ),
        # Held requests get no answer until released (at the latest at the window's end): the
        # producer notices only by its request timeout, as with a silent fault.
        _proxy(
            "request-hold", "hold produce requests, forward them after delay_s or at the window's end",
            "hold_request", silent=True,
        ),
        _proxy(
            "withhold-replay",
            "withhold chosen requests (by type, partition, producer id, transactional id, from the nth match) so their client "
            "times them out and moves on, then replay them to the broker: delay_s later, or delay_s after a request of type "
            "replay_after (e.g. EndTxn) was answered, or at the window's end; each withheld request is in the evidence",
            "hold_request", options=WithholdOptions, silent=True, standard=False,
        ),
        # A stalled write gets no answer until it is all sent: the producer notices only by its
        # request timeout, as with a silent fault.
        _proxy(
            "stall-write",
            "stop reading the broker's client connections (for stall_s at a time, gap_s apart, or the whole window) with their "
            "receive buffers capped: a client's write blocks part-way through a request (TCP back-pressure, nothing dropped); "
            "each stall and the request bytes it left waiting is in the evidence",
            "stall_write", silent=True, standard=False,
        ),
        _proxy(
            "lose-then-reject",
            "lose an idempotent producer's produce request and its pipeline with their connection (never appended), "
            "then answer the lost batch's retry with a broker error (default NOT_ENOUGH_REPLICAS) while the requests "
            "behind it reach the broker",
            "lose_then_reject", answers_error=True,
        ),
        # The planted anomalies (the run's negative controls), each until the load ends: an idempotent
        # producer's next batch after a swallowed one would be refused by the broker for its sequence
        # gap, and a run need not wait for a window beyond its load.
        _planting(
            PLANTED_LOSS,
            "answer the target broker's produce requests as appended, in its name, and never forward them, from the fault's "
            "start until the load ends: the client counts those records acked, no broker stores them (each swallowed batch is "
            "in the evidence); a checker that misses them is broken",
            "plant_loss",
            Plants(
                "swallowed", "planted_lost", "lost", "the proxy swallowed {planted} records, the checker counted {counted} lost", "idempotent",
                (
                    "planted-loss-caught",
                    "Kafka does not acknowledge a write it has not stored: under planted-loss the proxy acknowledged records in "
                    "the broker's name and never forwarded them, a loss made on purpose (the negative control). The row must "
                    "be red, with lost equal to planted_lost: a checker that misses them would miss a real loss.",
                ),
            ),
            "The proxy must have swallowed records of the scenario's topic, or the planted loss never met the load.",
        ),
        _planting(
            PLANTED_DUPLICATE,
            "until the load ends, send each topic's first and then a share (default 0.2) of the target broker's produce requests of producers without idempotence "
            "(acks != 0) to it twice, answering the client for the first copy only: the client sent each record once, "
            "the broker stores those twice (each copy and the broker's answer to it is in the evidence); a checker that "
            "misses them is broken",
            "plant_duplicate",
            Plants(
                "duplicated", "planted_duplicates", "duplicates",
                "the broker appended {planted} records a second time, the checker counted {counted} duplicates", "at-least-once",
                (
                    "planted-duplicate-caught",
                    "Kafka appends a produce request once per time it is sent: under planted-duplicate the proxy sent requests "
                    "the client sent once to the broker twice, a duplicate made on purpose. The row must be red, with duplicates "
                    "equal to planted_duplicates: a checker that misses them would miss a real duplicate.",
                ),
            ),
            "The broker must have appended a copy of records of the scenario's topic, or nothing was planted (an "
            "idempotent or transactional producer's requests, and acks=0 ones, pass untouched).",
        ),
        _planting(
            PLANTED_OFFSET,
            "until the load ends, report each topic's first and then a share (default 0.2) of the target broker's produce answers (acks != 0) with every appended partition "
            "at an offset 2^40 beyond the one the broker gave: the records are stored, the client believes them elsewhere "
            "(each shifted partition and its real offset is in the evidence); a checker that misses them is broken",
            "plant_offset",
            Plants(
                "shifted", "planted_offset_mismatch", "offset_mismatch",
                "the proxy shifted the acked offsets of {planted} records, the checker counted {counted} offset mismatches", "idempotent",
                (
                    "planted-offset-caught",
                    "Kafka's produce answer gives the offset a record was appended at: under planted-offset the proxy moved "
                    "the offsets of answers the broker gave, a mismatch made on purpose. The row must be red, with "
                    "offset_mismatch equal to planted_offset_mismatch: a checker that misses them would miss an ack that "
                    "names the wrong record.",
                ),
            ),
            "The proxy must have shifted an appended partition's answer of the scenario's topic, or nothing was planted "
            "(acks=0 requests pass untouched).",
        ),
        _planting(
            PLANTED_MISROUTE,
            "until the load ends, send each topic's first and then a share (default 0.2) of the target broker's produce requests of producers without idempotence "
            "(acks != 0) on with their partitions renamed (rotated among the request's partitions of a topic, or a lone one sent to "
            "another partition of its topic produced to through that broker) and answer the client for the partitions it sent: "
            "the client believes each record where its partitioner put it, the broker stores it in another partition (each moved "
            "partition, where it went and the broker's answer is in the evidence); a checker that misses them is broken",
            "plant_misroute",
            Plants(
                "misrouted", "planted_misrouted", "misrouted",
                "the broker appended {planted} records to another partition than the client's, the checker counted {counted} misrouted",
                "at-least-once",
                (
                    "planted-misroute-caught",
                    "Kafka appends a produce request's records to the partition the request names: under planted-misroute the "
                    "proxy renamed the partitions of requests, a misroute made on purpose. The row must be red, with misrouted "
                    "equal to planted_misrouted: a checker that misses them would miss a record stored outside its key's partition.",
                ),
                min_partitions=2,  # one partition: nowhere else to go
            ),
            "The broker must have appended moved records of the scenario's topic to another partition, or nothing was planted "
            "(an idempotent or transactional producer's requests, acks=0 ones, and a lone partition before another of its "
            "topic was seen pass untouched).",
        ),
        _planting(
            PLANTED_REORDER,
            "until the load ends, hold each topic's first and then a share (default 0.2) of the target broker's produce requests of producers without idempotence "
            "(acks != 0) until the next request of their connection, if it writes one of their partitions, has been forwarded before "
            "them, and answer the client in request order: the broker stores the later records first (each swapped partition, both "
            "offsets and the records of the held request whose key the later one also wrote is in the evidence); a checker that "
            "misses them is broken",
            "plant_reorder",
            Plants(
                "reordered", "planted_reordered", "reordered",
                "the broker stored {planted} records after a later record of their key, the checker counted {counted} reordered",
                "at-least-once",
                (
                    "planted-reorder-caught",
                    "Kafka appends a connection's produce requests in the order they arrive: under planted-reorder the proxy "
                    "forwarded a request behind the one the client sent after it, a reorder made on purpose. The row must be red, "
                    "with reordered equal to planted_reordered: a checker that misses them would miss records of a key stored out "
                    "of order.",
                ),
                # One key: the next request writes the held one's partition and key (`acklab.plan.planner.CONTROL`).
                control_keys=1,
            ),
            "The broker must have stored records of the scenario's topic after a later record of their key, or nothing was planted "
            "(an idempotent or transactional producer's requests, acks=0 and compressed ones pass untouched, and a producer with one "
            "request in flight never sends the next while one is held).",
        ),
        _link(
            "leader-isolate", "cut the leader off from every other node (clients still reach it), heal after the duration",
            "leader:0", NoOptions, Links(seen="leader-moved"), frozenset({"leader"}),
        ),
        _link("node-isolate", "cut a node off from its peers (default: every other node; clients still reach it)", "follower:0", LinkOptions),
        _link("split", "split the nodes into the target's side and the rest, no packet crossing", "controller", SplitOptions, Links("split")),
        _link(
            "one-way-cut", "drop the target's packets to its peers (direction out) or theirs to it (in)", "leader:0", OneWayOptions,
            Links("one-way"),
        ),
        _link("lossy-link", "drop a share of the packets between the target and its peers (default 0.3)", "leader:0", LossyLinkOptions),
    )
}
FAULT_NAMES = tuple(FAULTS)
PLANTING: Mapping[str, Plants] = {name: spec.plants for name, spec in FAULTS.items() if spec.plants is not None}
"""The planting faults, in catalog order, and what each plants."""


def permanent_error(fault: str, options: Mapping[str, Any]) -> bool:
    """Whether a schedule step of `fault` with `options` answers writes with an error Kafka
    clients do not retry (`acklab.proxy.codes.ERRORS`)."""
    return answers_writes(fault, options) and not ERRORS[options["error"]].retriable


def answers_writes(fault: str, options: Mapping[str, Any]) -> bool:
    """Whether a schedule step of `fault` with `options` answers produce requests with an error."""
    return FAULTS[fault].answers_error and PRODUCE in options.get("apis", [PRODUCE])

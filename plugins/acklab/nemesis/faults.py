"""Every fact about each catalog fault, in one place and as pure data: what it does, what it may
target, its options, and the properties the schedule and the guarantee model rely on. How a fault
is applied, undone and confirmed is `acklab.nemesis.actions`; nothing here touches a cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from acklab.proxy.protocol import ERRORS
from acklab.proxy.rules import check_error

NO_FAULT = "none"
TargetKind = Literal["leader", "follower", "controller", "broker", "random-broker"]
ANY_NODE: frozenset[TargetKind] = frozenset({"leader", "follower", "controller", "broker", "random-broker"})
PARTITION: frozenset[TargetKind] = frozenset({"leader", "follower"})


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplicasDownOptions(NoOptions):
    count: int | None = Field(None, ge=1, description="followers to stop (default: enough to break min.insync)")


class ProxyOptions(NoOptions):
    """Options of every proxy fault: each request (or response) is affected with `probability`,
    at most `count` of them in the window."""

    probability: float = Field(1.0, ge=0, le=1)
    count: int | None = Field(None, ge=1, description="at most this many requests affected (default: no limit)")


class FrameOptions(ProxyOptions):
    apis: list[int] = Field(default_factory=lambda: [0], description="Kafka API keys (0 = PRODUCE; empty = all)")


class AckLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1)
    then: Literal["hold", "close"] = "close"


class RequestLossOptions(FrameOptions):
    probability: float = Field(0.3, ge=0, le=1)


class LatencyOptions(FrameOptions):
    delay_s: float = Field(30.0, gt=0)
    apis: list[int] = Field(default_factory=list)


class PartitionOptions(FrameOptions):
    apis: list[int] = Field(default_factory=list)


class ErrorOptions(ProxyOptions):
    """The error PRODUCE requests are answered with, by name (`acklab.proxy.protocol.ERRORS`)."""

    error: str = "NOT_ENOUGH_REPLICAS"

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


class AfterAppendOptions(ErrorOptions):
    error: str = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class LoseThenRejectOptions(NoOptions):
    """How long the lost connection lives before the proxy closes it, and how long the rejection
    of the lost batch's retry is held (requests behind it are pipelined meanwhile)."""

    error: str = "NOT_ENOUGH_REPLICAS"
    delay_s: float = Field(0.5, gt=0, description="seconds the lost connection lives; seconds the retry's rejection is held")

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


class HoldOptions(ProxyOptions):
    """Held PRODUCE requests are forwarded after `delay_s`, or right after the next EndTxn answered
    (`until: end_txn`), and at the latest when the window ends."""

    delay_s: float = Field(0.0, ge=0, description="release each request this long after it arrived (0: at `until`)")
    until: Literal["end", "end_txn"] = Field("end", description="end: the window's end; end_txn: the next EndTxn answered")
    transactional_only: bool = Field(False, description="hold only requests of transactional producers")

    @model_validator(mode="after")
    def _one_release(self) -> HoldOptions:
        if self.delay_s and self.until == "end_txn":
            raise ValueError("delay_s and until: end_txn exclude each other (a held request is released by one of them)")
        return self


class LinkOptions(NoOptions):
    peers: list[int] = Field(default_factory=list, description="node ids at the other end of the cut links (empty = every other node)")


class OneWayOptions(LinkOptions):
    direction: Literal["out", "in"] = Field("out", description="out: the target's packets to its peers are dropped; in: theirs to it")


class LossyLinkOptions(LinkOptions):
    probability: float = Field(0.3, gt=0, lt=1, description="share of the packets dropped, each direction")


class SplitOptions(NoOptions):
    side: list[int] = Field(default_factory=list, description="node ids on the target's side besides it (the rest form the other side)")


@dataclass(frozen=True)
class FaultSpec:
    """A catalog fault.

    `bounded`: its effect on a producer ends when its window ends (the node is back, the proxy
    forwards again). `silent`: it swallows requests without an answer or a closed connection, so a
    request lost in flight is noticed only when it times out in the client; link cuts are silent
    too, as a leader cut off from its followers holds acks=all requests until they time out.
    `moves_leaders`: partition leaders may move because of it (in a schedule without such a fault
    a leader change is unplanned). `stops_nodes`: it acts on broker processes (two such faults may
    not overlap). `needs_proxy`: it acts through the Kafka-aware proxy in front of the client
    listeners. `cuts_links`: it cuts links between nodes (`acklab.cluster.links`: iptables and
    cgroups, so root), never between clients and nodes. `precedes_load`: a step of it may run
    before the load (`FaultStep.before_load`): its action confirms its effect, then lets the
    producers start (`acklab.nemesis.actions.FaultContext.settled`)."""

    name: str
    description: str
    default_target: str | None
    targets: frozenset[TargetKind]
    options: type[BaseModel] = NoOptions
    bounded: bool = True
    silent: bool = False
    moves_leaders: bool = False
    stops_nodes: bool = False
    needs_proxy: bool = False
    answers_error: bool = False  # it answers writes with its option `error` (a Kafka error name)
    cuts_links: bool = False
    precedes_load: bool = False


def _process(name: str, description: str, target: str) -> FaultSpec:
    return FaultSpec(name, description, target, ANY_NODE, moves_leaders=True, stops_nodes=True, precedes_load=True)


def _proxy(
    name: str, description: str, options: type[BaseModel], *, bounded: bool = True, silent: bool = False, answers_error: bool = False
) -> FaultSpec:
    return FaultSpec(
        name, description, "leader:0", ANY_NODE, options, bounded=bounded, silent=silent, needs_proxy=True, answers_error=answers_error
    )


def _link(name: str, description: str, target: str, options: type[BaseModel], targets: frozenset[TargetKind] = ANY_NODE) -> FaultSpec:
    return FaultSpec(name, description, target, targets, options, silent=True, moves_leaders=True, cuts_links=True)


FAULTS: Mapping[str, FaultSpec] = {
    spec.name: spec
    for spec in (
        FaultSpec(NO_FAULT, "no fault: the baseline", None, frozenset()),
        _process("leader-kill", "SIGKILL the partition leader, restart after the duration", "leader:0"),
        _process("leader-restart", "SIGTERM (controlled shutdown) of the leader, start after the duration", "leader:0"),
        _process("leader-pause", "SIGSTOP the leader (it keeps its sockets), SIGCONT after the duration", "leader:0"),
        _process("follower-kill", "SIGKILL an in-sync follower, restart after the duration", "follower:0"),
        _process("controller-kill", "SIGKILL the active KRaft controller, restart after the duration", "controller"),
        FaultSpec(
            "rolling-restart", "clean restart of every broker in turn (takes as long as it takes)", None, frozenset(),
            bounded=False, moves_leaders=True, stops_nodes=True,
        ),
        FaultSpec(
            "replicas-down", "stop followers until the ISR is below min.insync.replicas", "leader:0", PARTITION,
            ReplicasDownOptions, moves_leaders=True, stops_nodes=True,
        ),
        _proxy("ack-loss", "drop produce responses after the broker appended, then close the connection", AckLossOptions),
        _proxy("request-loss", "drop produce requests before they reach the broker", RequestLossOptions, silent=True),
        # A response sent at the end of the window is still delayed by delay_s: not bounded by the window.
        _proxy("latency", "delay every response of the broker by delay_s (default 30 s)", LatencyOptions, bounded=False),
        _proxy("client-partition", "blackhole the broker for clients (replication continues)", PartitionOptions, silent=True),
        _proxy(
            "error-inject", "answer produce requests with a broker error (default NOT_ENOUGH_REPLICAS); they never reach the broker",
            ErrorOptions, answers_error=True,
        ),
        _proxy(
            "error-after-append",
            "forward produce requests, then report the appended partitions failed (default NOT_ENOUGH_REPLICAS_AFTER_APPEND)",
            AfterAppendOptions, answers_error=True,
        ),
        # Held requests get no answer until released (at the latest at the window's end): the
        # producer notices only by its request timeout, as with a silent fault.
        _proxy(
            "request-hold", "hold produce requests, forward them after delay_s, the next EndTxn, or the window's end",
            HoldOptions, silent=True,
        ),
        _proxy(
            "lose-then-reject",
            "lose an idempotent producer's produce request and its pipeline with their connection (never appended), "
            "then answer the lost batch's retry with a broker error (default NOT_ENOUGH_REPLICAS) while the requests "
            "behind it reach the broker",
            LoseThenRejectOptions, answers_error=True,
        ),
        _link(
            "leader-isolate", "cut the leader off from every other node (clients still reach it), heal after the duration",
            "leader:0", NoOptions, frozenset({"leader"}),
        ),
        _link("node-isolate", "cut a node off from its peers (default: every other node; clients still reach it)", "follower:0", LinkOptions),
        _link("split", "split the nodes into the target's side and the rest, no packet crossing", "controller", SplitOptions),
        _link("one-way-cut", "drop the target's packets to its peers (direction out) or theirs to it (in)", "leader:0", OneWayOptions),
        _link("lossy-link", "drop a share of the packets between the target and its peers (default 0.3)", "leader:0", LossyLinkOptions),
    )
}
FAULT_NAMES = tuple(FAULTS)


def permanent_error(fault: str, options: Mapping[str, Any]) -> bool:
    """Whether a schedule step of `fault` with `options` answers writes with an error Kafka
    clients do not retry (`acklab.proxy.protocol.ERRORS`)."""
    return FAULTS[fault].answers_error and not ERRORS[options["error"]].retriable

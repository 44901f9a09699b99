"""Each catalog fault's "took effect" check, on a scripted cluster: the effect the script shows makes
the fault effective (the evidence can pass), an effect that never shows makes it ineffective (the
scenario is incomplete, never green), and the fault is undone whatever happened. The same actions on
real clusters: tests/integration/test_faults.py, test_proxy_faults.py and test_link_faults.py."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import pytest

from acklab.base.spec import parse_model
from acklab.cluster.admin import PartitionState
from acklab.nemesis import actions
from acklab.nemesis.actions import ACTIONS, FaultContext
from acklab.nemesis.events import FaultEvent, Window
from acklab.nemesis.faults import FAULTS
from acklab.nemesis.schedule import FaultStep, schedule_for
from acklab.proxy.rules import ProxyRule
from acklab.store.runs import Intervention
from acklab.workload import processing

TOPIC = "t"
# The `__transaction_state` partition of the fake pipeline's instance 0, `g-p0`: Java's "g-p0".hashCode()
# = 103*31^3 + 45*31^2 + 112*31 + 48 = 3115238, and 3115238 % 50 = 38.
TXN_PARTITION = 38
# The `__consumer_offsets` partition of the fake pipeline's group `g` (4 partitions, as acklab's brokers
# have): Java's "g".hashCode() = 103, and 103 % 4 = 3.
OFFSETS_PARTITION = 3
# Each fault's window, and how long a link cut's effect is still looked for after the heal. A
# scripted effect shows at a read, not at a time, so short windows decide the same as long ones.
DURATION_S = 0.05
AFTERMATH_S = 0.05

Change = Callable[["FakeCluster"], None]


class FakeAdmin:
    """What the actions ask the admin client; every answer is a read of the scripted cluster."""

    def __init__(self, cluster: FakeCluster, exclude: list[int]) -> None:
        self.cluster, self.exclude = cluster, exclude
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partition(self, topic: str, partition: int) -> PartitionState:
        self.cluster.read(metadata=True)
        return self.cluster.partitions[(topic, partition)]

    def broker_ids(self) -> set[int]:
        self.cluster.read(metadata=True)
        return set(self.cluster.registered)

    def partitions(self, topic: str) -> list[PartitionState]:
        """A scenario's topic as the script has it, or `__transaction_state` (50 partitions, Kafka's default) or `__consumer_offsets` (4): the
        partition the group's instance 0 (or the group) hashes to is led by the coordinator, every other
        one by another broker, so a coordinator taken from the wrong partition is the wrong broker."""
        if topic not in ("__transaction_state", "__consumer_offsets"):  # a scenario's topic (planted-misroute's leaders)
            self.cluster.read(metadata=True)
            return [state for (name, _), state in sorted(self.cluster.partitions.items()) if name == topic]
        count, led = {"__transaction_state": (50, TXN_PARTITION), "__consumer_offsets": (4, OFFSETS_PARTITION)}[topic]
        self.cluster.asked.append(topic)
        self.cluster.read(metadata=True)
        coordinator = self.cluster.coordinator
        other = next(b for b in self.cluster.topology.broker_ids if b != coordinator)
        leaders = [coordinator if p == led else other for p in range(count)]
        return [PartitionState(topic, p, leader, (leader,), (leader,)) for p, leader in enumerate(leaders)]

    def wait_in_sync(self, topic: str, timeout_s: float) -> list[PartitionState]:
        self.cluster.calls.append(("wait_in_sync", topic))
        self.cluster.read(metadata=True)
        if self.cluster.failing:
            raise TimeoutError(f"topic {topic} not in sync after {timeout_s:.0f}s")
        return [self.cluster.partitions[(topic, 0)]]


class FakeProxy:
    """The fault proxy's control: per-broker rules and counters (the script moves the counters)."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.counters: dict[int, Counter[str]] = {b: Counter() for b in cluster.topology.broker_ids}
        self.rules: dict[int, ProxyRule] = {}
        self.history: list[tuple[int, ProxyRule]] = []

    def stats(self) -> dict[int, dict[str, int]]:
        self.cluster.read()
        return {broker: dict(counters) for broker, counters in self.counters.items()}

    def set_rule(self, broker: int, rule: ProxyRule) -> None:
        self.rules[broker] = rule
        self.history.append((broker, rule))
        self.cluster.did("set_rule", broker)

    def clear(self, broker: int | None = None) -> None:
        self.rules.pop(broker) if broker is not None else self.rules.clear()
        self.cluster.calls.append(("clear", broker))

    def withheld(self, broker: int) -> list[dict]:
        return []

    def swallowed(self, broker: int) -> list[dict]:
        return []

    def log(self, broker: int, log: str) -> list[dict]:
        return []


class FakeLinks:
    """Link control: cuts by id, the packets each dropped (scripted), heals."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.cuts: dict[str, tuple[list[tuple[int, int]], float]] = {}
        self.history: list[tuple[list[tuple[int, int]], float]] = []
        self.drops = 0

    def cut(self, pairs: list[tuple[int, int]], probability: float = 1.0) -> str:
        fault = f"cut-{len(self.cluster.calls)}"
        self.cuts[fault] = (list(pairs), probability)
        self.history.append(self.cuts[fault])
        self.cluster.did("cut", fault)
        return fault

    def dropped(self, fault: str) -> int:
        self.cluster.read()
        return self.drops

    def heal(self, fault: str) -> None:
        self.cuts.pop(fault)
        self.cluster.did("heal", fault)


class FakeProcessors:
    """A pipeline's processor instances as the processor faults see them (`actions.Processors`),
    scripted through their cluster: an armed instance reaches its point and stops unless the
    cluster says `no_point`; the group moves on once `moved` is set; a log read (`moved_on`) is a
    metadata read, which fails when the cluster is unreachable. Another pipeline of the group (a
    second instance of this) can be scripted apart: `reaches_point`, `moves_on`; `calls` are its own."""

    def __init__(self, cluster: FakeCluster, group_id: str = "g", reaches_point: bool = True, moves_on: bool = True) -> None:
        self.cluster, self.group_id = cluster, group_id
        self.reaches_point, self.moves_on = reaches_point, moves_on
        self.stopped: set[int] = set()  # at their point (SIGSTOP)
        self.dead: set[int] = set()  # killed, not restarted
        self.calls: list[str] = []

    def transactional_id(self, number: int) -> str:
        return processing.transactional_id(self.group_id, number)

    def arm(self, number: int, timeout_s: float, stop: Callable[[], bool]) -> dict[str, Any]:
        self.calls.append("arm")
        self.cluster.did("arm", number)
        self.cluster.read()
        if self.cluster.no_point or self.cluster.unreachable or not self.reaches_point:
            raise RuntimeError("no point")
        self.stopped.add(number)
        return {"t": time.time(), "txn": 4, "generation": 1, "instance": number, "incarnation": 0}

    def kill(self, number: int) -> int:
        self.calls.append("kill")
        self.cluster.did("kill_processor", number)
        self.stopped.discard(number)
        self.dead.add(number)
        return -9

    def restart(self, number: int) -> object:
        self.calls.append("restart")
        self.cluster.did("restart_processor", number)
        self.dead.discard(number)
        return None

    def resume(self, number: int) -> None:
        self.calls.append("resume")
        self.cluster.did("resume_processor", number)
        self.stopped.discard(number)

    def moved_on(self, number: int, since: float, generation: int) -> dict[str, Any] | None:
        self.cluster.read(metadata=True)
        return {"generation": generation + 1, "instance": 1, "t": time.time()} if self.cluster.moved and self.moves_on else None


class FakeCluster:
    """A cluster whose state changes only as scripted: `when(call, change, after)` applies `change`
    at the `after`-th read (metadata, controller, process state, proxy counters) following the first
    `call` (kill, stop, pause, start, resume, set_rule, cut, heal). Without a script nothing changes,
    except that a killed or stopped process is down and a paused one frozen (unless `stuck`)."""

    def __init__(
        self, brokers: tuple[int, ...] = (1, 2, 3), replicas: tuple[int, ...] = (1, 2, 3), controller: int = 3,
        controllers: tuple[int, ...] = (), voters: tuple[int, ...] | None = None,
    ) -> None:
        """`controllers`: dedicated controller nodes; `voters`: the KRaft voters (default: those, or every broker)."""
        self.topology = SimpleNamespace(
            broker_ids=list(brokers), node_ids=sorted({*brokers, *controllers}), controller_ids=list(voters or controllers or brokers)
        )
        self.partitions = {(TOPIC, 0): PartitionState(TOPIC, 0, replicas[0], replicas, replicas)}
        self.registered = set(brokers)
        self.controller = controller
        self.running = set(self.topology.node_ids)
        self.paused: set[int] = set()
        self.stuck = False  # signals have no visible effect on the processes
        self.failing = False  # wait_in_sync times out
        self.unreachable = False  # every read of metadata, the controller or a process's state raises
        self.coordinator = 1  # of the pipeline's group and of its instance 0's transactions
        self.asked: list[str] = []  # the topics whose partition leaders were asked for
        self.no_point = False  # an armed processor never reaches its point
        self.moved = False  # the pipeline's group moved past the paused processor's generation
        self.calls: list[tuple[str, Any]] = []
        self.admins: list[FakeAdmin] = []
        self.script: dict[str, tuple[int, Change]] = {}
        self.armed: list[list[Any]] = []
        self.lock = threading.Lock()
        self._proxy, self._links = FakeProxy(self), FakeLinks(self)
        self.processors = FakeProcessors(self)

    # ---- the script ----

    def when(self, call: str, change: Change, after: int = 0) -> None:
        self.script[call] = (after, change)

    def did(self, call: str, arg: Any) -> None:
        with self.lock:
            self.calls.append((call, arg))
            if call in self.script:
                self.armed.append(list(self.script.pop(call)))

    def read(self, metadata: bool = False) -> None:
        """One observation: scripted changes due now happen; a metadata read fails when unreachable."""
        with self.lock:
            for armed in list(self.armed):
                if armed[0] == 0:
                    self.armed.remove(armed)
                    armed[1](self)
                else:
                    armed[0] -= 1
        if metadata and self.unreachable:
            raise ConnectionError("metadata unreachable")

    def set_partition(self, **changes: Any) -> None:
        self.partitions[(TOPIC, 0)] = replace(self.partitions[(TOPIC, 0)], **changes)

    # ---- the Cluster interface the actions use ----

    def admin(self, timeout_s: float = 10.0, exclude: list[int] | tuple[int, ...] = ()) -> FakeAdmin:
        admin = FakeAdmin(self, list(exclude))
        self.admins.append(admin)
        return admin

    def partition(self, topic: str, partition: int, timeout_s: float = 5.0) -> PartitionState:
        with self.admin(timeout_s) as admin:
            return admin.partition(topic, partition)

    def active_controller(self) -> int:
        self.read(metadata=True)
        return self.controller

    def is_running(self, node_id: int) -> bool:
        self.read(metadata=True)
        return node_id in self.running

    def is_paused(self, node_id: int) -> bool:
        self.read(metadata=True)
        return node_id in self.paused

    def kill(self, node_id: int) -> None:
        self._down(node_id)
        self.did("kill", node_id)

    def stop(self, node_id: int, timeout_s: float = 60.0) -> None:
        self._down(node_id)
        self.did("stop", node_id)

    def _down(self, node_id: int) -> None:
        if not self.stuck:
            self.running.discard(node_id)

    def start(self, node_id: int) -> None:
        self.running.add(node_id)
        self.did("start", node_id)

    def pause(self, node_id: int) -> None:
        if not self.stuck:
            self.paused.add(node_id)
        self.did("pause", node_id)

    def resume(self, node_id: int) -> None:
        self.paused.discard(node_id)
        self.did("resume", node_id)

    def proxy(self) -> FakeProxy:
        return self._proxy

    def links(self) -> FakeLinks:
        return self._links

    # ---- what the tests check ----

    def called(self, name: str) -> list[Any]:
        return [arg for call, arg in self.calls if call == name]

    def assert_undone(self) -> None:
        """Every process runs unfrozen, no proxy rule and no cut is left, and the fault did something."""
        assert self.running == set(self.topology.node_ids) and not self.paused, self.calls
        assert not self._proxy.rules and not self._links.cuts, self.calls
        assert not self.processors.stopped and not self.processors.dead, self.calls  # every processor resumed or restarted
        assert any(call in ("kill", "stop", "pause", "set_rule", "cut", "arm") for call, _ in self.calls), self.calls


# ---- scripted changes ----------------------------------------------------------------------


def leader_moves_to(broker: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        state = cluster.partitions[(TOPIC, 0)]
        cluster.set_partition(leader=broker, isr=tuple(b for b in state.isr if b != state.leader))

    return change


def isr_loses(*brokers: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.set_partition(isr=tuple(b for b in cluster.partitions[(TOPIC, 0)].isr if b not in brokers))

    return change


def controller_moves_to(node: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.controller = node

    return change


def fenced(broker: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.registered.discard(broker)

    return change


def counted(broker: int, **counts: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.proxy().counters[broker].update(counts)

    return change


def packets_dropped(count: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.links().drops = count

    return change


def nothing(cluster: FakeCluster) -> None:
    pass


def coordinator_moves_to(broker: int) -> Change:
    def change(cluster: FakeCluster) -> None:
        cluster.coordinator = broker

    return change


def group_moves_on(cluster: FakeCluster) -> None:
    cluster.moved = True


def no_point(cluster: FakeCluster) -> None:
    cluster.no_point = True


def unreachable(cluster: FakeCluster) -> None:
    cluster.unreachable = True


def all_of(*changes: Change) -> Change:
    def change(cluster: FakeCluster) -> None:
        for one in changes:
            one(cluster)

    return change


@dataclass(frozen=True)
class Case:
    """A fault on three brokers (RF=3, min.insync=2, partition 0 led by 1 with ISR [1, 2, 3], the
    active controller 3): the call after which the cluster shows the effect, the effect scripted and
    what the effect text then says; what it says when the cluster shows nothing (`unseen`: the
    cluster's state before such a fault, `noise`: what changes after the call all the same)."""

    call: str
    change: Change
    effect: str
    no_effect: str
    unseen: Change = nothing
    noise: Change = nothing


def proxy_case(counter: str, seen: str, *others: str) -> Case:
    """A proxy fault on partition 0's leader (broker 1): effective once it counted frames it acted
    on; frames it merely forwarded do not count."""
    zero = "".join(f", {other} 0" for other in others)
    traffic = counted(1, **{"requests.0.v9": 40, "responses.0": 40, "connections": 2})
    return Case(
        "set_rule", all_of(traffic, counted(1, **{counter: 3})), f"proxy {seen} 3{zero} on broker 1", f"proxy {seen} 0{zero} on broker 1",
        noise=traffic,
    )


NO_CUT_EFFECT = f"links cut; no effect seen within 0s (+{AFTERMATH_S:g}s)"


def cut_case(change: Change, effect: str) -> Case:
    return Case("cut", all_of(change, packets_dropped(12)), effect, NO_CUT_EFFECT, noise=packets_dropped(12))


CASES: dict[str, Case] = {
    "leader-kill": Case("kill", leader_moves_to(2), "leader of partition 0 moved 1 -> 2 in ", "kill of broker 1: no effect seen within 0s"),
    "leader-restart": Case("stop", leader_moves_to(2), "leader of partition 0 moved 1 -> 2 in ", "stop of broker 1: no effect seen within 0s"),
    "leader-pause": Case("pause", leader_moves_to(3), "leader of partition 0 moved 1 -> 3 in ", "pause of broker 1: no effect seen within 0s"),
    "follower-kill": Case("kill", isr_loses(2), "follower 2 left the ISR [1, 3] in ", "kill of broker 2: no effect seen within 0s"),
    "follower-restart": Case("stop", isr_loses(2), "follower 2 left the ISR [1, 3] in ", "stop of broker 2: no effect seen within 0s"),
    "controller-kill": Case("kill", controller_moves_to(1), "active controller moved 3 -> 1 in ", "kill of broker 3: no effect seen within 0s"),
    "rolling-restart": Case("stop", nothing, "restarted brokers [1, 2, 3] in turn", "restarted only brokers [1, 2]", unseen=fenced(3)),
    "replicas-down": Case("stop", isr_loses(2, 3), "ISR [1] below min.insync.replicas=2 in ", "stopped [2, 3]; ISR never fell below 2"),
    "ack-loss": proxy_case("dropped_responses", "dropped responses"),
    "request-loss": proxy_case("dropped_requests", "dropped requests"),
    "latency": proxy_case("delayed_responses", "delayed responses"),
    "client-partition": proxy_case("blackholed_requests", "blackholed requests", "blackholed responses"),
    "error-inject": proxy_case("injected_errors", "injected errors"),
    "error-after-append": proxy_case("replaced_errors", "replaced errors"),
    "lose-then-reject": proxy_case("injected_errors", "injected errors"),
    "request-hold": proxy_case("held_requests", "held requests"),
    "withhold-replay": proxy_case("held_requests", "held requests"),
    "stall-write": proxy_case("stalled_writes", "stalled writes"),
    "planted-loss": proxy_case("swallowed_requests", "swallowed requests"),
    "planted-duplicate": proxy_case("duplicated_requests", "duplicated requests"),
    "planted-offset": proxy_case("shifted_requests", "shifted requests"),
    "planted-misroute": proxy_case("misrouted_requests", "misrouted requests"),
    "planted-reorder": proxy_case("reordered_requests", "reordered requests"),
    "leader-isolate": cut_case(leader_moves_to(2), "leader of t[0] moved 1 -> 2 in "),
    "node-isolate": cut_case(isr_loses(2), "ISR [1, 2, 3] -> [1, 3] (without [2]) in "),
    "split": cut_case(controller_moves_to(1), "active controller moved 3 -> 1 in "),
    "one-way-cut": cut_case(fenced(1), "broker(s) [1] fenced in "),
    "lossy-link": Case("cut", packets_dropped(17), "17 packets dropped", "no packet dropped"),
    "group-coordinator-kill": Case("kill", coordinator_moves_to(2), "group-coordinator moved 1 -> 2 in ", "kill of broker 1: no effect seen within 0s"),
    "txn-coordinator-kill": Case("kill", coordinator_moves_to(3), "txn-coordinator moved 1 -> 3 in ", "kill of broker 1: no effect seen within 0s"),
    # The processor faults' unseen effect is the point never reached (the group not moving on: below).
    "processor-kill": Case("arm", nothing, "killed processor 0 at its point in 1 pipeline(s)", "processor 0 not hit at its point: no point", unseen=no_point),
    "zombie": Case(
        "arm", group_moves_on, "processor 0 paused at its point until its group moved on (generation 2) in 1 pipeline(s)",
        "processor 0: no point", unseen=no_point,
    ),
}
def step_of(fault: str, duration_s: float = DURATION_S, **fields: Any) -> FaultStep:
    """A step as the schedule module builds it (defaults per fault; target and options validated)."""
    if not fields:
        return schedule_for(fault, at_s=0.0, duration_s=duration_s)[0]
    return parse_model(FaultStep, {"fault": fault, "at_s": 0.0, "duration_s": duration_s, **fields}, f"fault {fault}")


def window(step: FaultStep) -> Window:
    return Window(time.monotonic() + step.duration_s, threading.Event())


def run(
    cluster: FakeCluster, step: FaultStep, min_insync_replicas: int = 2, on: Window | None = None,
    processors: dict[str, FakeProcessors] | None = None,
) -> FaultEvent:
    """`processors`: the group's pipelines (default: one, on TOPIC, the cluster's)."""
    processors = {TOPIC: cluster.processors} if processors is None else processors
    context = FaultContext(cluster, TOPIC, min_insync_replicas, processors=processors)  # type: ignore[arg-type]
    event = ACTIONS[step.fault](context, step, on or window(step))
    assert event.ended is not None and event.ended >= event.started
    assert all(admin.closed for admin in cluster.admins), "every admin client an action makes is closed by it"
    return event


@pytest.fixture(autouse=True)
def short_aftermath(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "AFTERMATH_S", AFTERMATH_S)


def case_of(fault: str) -> Case:
    assert fault in CASES, f"fault {fault!r} has an action but no scripted case here: add one to CASES"
    return CASES[fault]


# ---- every fault: effect seen / never seen -------------------------------------------------


def test_every_scripted_case_is_a_catalog_fault() -> None:
    assert set(CASES) <= set(ACTIONS) and set(ACTIONS) == set(FAULTS) - {"none"}


@pytest.mark.parametrize("fault", sorted(ACTIONS))
def test_the_scripted_effect_makes_the_fault_effective(fault: str) -> None:
    case = case_of(fault)
    cluster = FakeCluster()
    cluster.when(case.call, case.change)
    event = run(cluster, step_of(fault))
    assert event.effective, event
    assert event.effect.startswith(case.effect), event.effect
    assert event.effective_at is not None and event.started <= event.effective_at <= event.ended  # type: ignore[operator]
    assert event.effective_after is not None and event.started <= event.effective_after <= event.effective_at
    cluster.assert_undone()


@pytest.mark.parametrize("fault", sorted(ACTIONS))
def test_an_effect_never_seen_leaves_the_fault_ineffective(fault: str) -> None:
    case = case_of(fault)
    cluster = FakeCluster()
    case.unseen(cluster)
    cluster.when(case.call, case.noise)
    event = run(cluster, step_of(fault))
    assert not event.effective and event.effective_at is None, event
    assert event.effect == case.no_effect, event.effect
    cluster.assert_undone()


# ---- every fault: undone, whatever happens -------------------------------------------------


@pytest.mark.parametrize("fault", sorted(ACTIONS))
def test_a_check_that_raises_is_no_effect_and_the_fault_is_still_undone(fault: str) -> None:
    """Once the fault is on, every read of metadata, the controller or a process's state raises: the
    check sees no effect (proxy and packet counters still answer); rolling-restart's sync wait
    raises out of it, after the broker it stopped was started again."""
    case = case_of(fault)
    cluster = FakeCluster()
    cluster.when(case.call, unreachable)
    if fault == "rolling-restart":
        with pytest.raises(ConnectionError):
            run(cluster, step_of(fault))
        assert cluster.called("stop") == cluster.called("start") == [1]
    else:
        event = run(cluster, step_of(fault))
        assert not event.effective and event.effect == case.no_effect, event
    cluster.assert_undone()


class FailingWindow(Window):
    def wait_out(self) -> None:
        raise RuntimeError("interrupted while the fault is on")


@pytest.mark.parametrize("fault", sorted(ACTIONS))
def test_a_fault_interrupted_while_on_is_undone_before_the_error_propagates(fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself raises (not just one read in it), the window's wait raises, rolling-restart's
    sync wait times out: the exception propagates, but only after the fault was undone."""
    case_of(fault)
    cluster = FakeCluster()
    cluster.failing = True

    def raising_poll(window: Window, check: Callable[[], str | None], interval_s: float = 0.2) -> str | None:
        raise RuntimeError("check failed")

    monkeypatch.setattr(actions, "_poll", raising_poll)
    step = step_of(fault)
    with pytest.raises((RuntimeError, TimeoutError)):
        run(cluster, step, on=FailingWindow(time.monotonic() + step.duration_s, threading.Event()))
    cluster.assert_undone()


# ---- particular paths ------------------------------------------------------------------------


def test_the_effect_is_polled_for_until_it_shows() -> None:
    cluster = FakeCluster()
    cluster.when("kill", leader_moves_to(2), after=2)  # the third read after the kill shows it
    event = run(cluster, step_of("leader-kill", duration_s=0.8))
    assert event.effective and "moved 1 -> 2" in event.effect
    assert event.effective_at is not None and event.effective_at - event.started >= 0.3  # two polls (0.2 s apart) saw nothing
    assert event.effective_after is not None and 0.2 <= event.effective_after - event.started < event.effective_at - event.started  # the second miss
    assert cluster.admins[-1].exclude == [1]  # the check asks the brokers but the victim


@pytest.mark.parametrize(("fault", "state"), [("leader-kill", "down"), ("leader-restart", "down"), ("leader-pause", "frozen"), ("controller-kill", "down")])
def test_a_sole_replica_fault_on_a_single_broker_is_judged_by_the_process(fault: str, state: str) -> None:
    """One broker, RF=1: no leader can take over; the broker down (or frozen) is the effect."""
    cluster = FakeCluster(brokers=(1,), replicas=(1,), controller=1)
    event = run(cluster, step_of(fault), min_insync_replicas=1)
    assert event.effective and event.effect.startswith(f"broker 1 {state}, the only replica of partition 0: no leader can take over in ")
    cluster.assert_undone()

    stuck = FakeCluster(brokers=(1,), replicas=(1,), controller=1)
    stuck.stuck = True  # the signal had no effect on the process
    action = {"leader-restart": "stop", "leader-pause": "pause"}.get(fault, "kill")
    event = run(stuck, step_of(fault), min_insync_replicas=1)
    assert not event.effective and event.effect == f"{action} of broker 1: no effect seen within 0s", event.effect
    assert stuck.called("resume" if action == "pause" else "start") == [1]


def test_a_sole_replica_among_brokers_is_judged_by_the_process() -> None:
    """Two brokers, RF=1: partition 0's only replica is broker 2; its leader stays 2 (offline)."""
    cluster = FakeCluster(brokers=(1, 2), replicas=(2,), controller=1)
    event = run(cluster, step_of("leader-kill"), min_insync_replicas=1)
    assert event.effective and event.effect.startswith("broker 2 down, the only replica of partition 0"), event.effect
    assert cluster.called("kill") == cluster.called("start") == [2]


@pytest.mark.parametrize(("fault", "target"), [("leader-kill", "leader:0"), ("leader-kill", "broker:1"), ("follower-kill", "follower:0"),
                                                ("leader-pause", "leader:0"), ("controller-kill", "controller")])
def test_a_fault_on_the_only_controller_is_judged_by_the_process(fault: str, target: str) -> None:
    """Two brokers, broker 1 the only KRaft voter (`two-brokers-rf2`): once it is down nobody can move a
    leader, fence a broker or take over as controller; the process down (or frozen) is the effect."""
    leader = 2 if fault == "follower-kill" else 1
    cluster = FakeCluster(brokers=(1, 2), replicas=(leader, 3 - leader), controller=1, voters=(1,))
    event = run(cluster, step_of(fault, target=target), min_insync_replicas=1)
    state = "frozen" if fault == "leader-pause" else "down"
    assert event.effective and event.effect.startswith(f"broker 1 {state}, the only KRaft controller: "), event.effect
    cluster.assert_undone()


def test_a_follower_fault_without_a_follower_does_nothing() -> None:
    cluster = FakeCluster(brokers=(1, 2), replicas=(2,), controller=1)
    event = run(cluster, step_of("follower-kill"), min_insync_replicas=1)
    assert not event.effective and event.effect == "follower:0 resolved to no broker"
    assert not cluster.called("kill") and not cluster.called("start")


@pytest.mark.parametrize("fault", ["leader-kill", "leader-restart", "leader-pause"])
@pytest.mark.parametrize("target", ["broker:2", "random-broker"])
def test_a_broker_target_that_does_not_lead_the_partition_is_judged_by_its_fencing(
    fault: str, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0 is led by broker 1 throughout: the fault on broker 2 did not move that leader (the
    effect text must not say so); it takes effect once the controller fences broker 2."""
    monkeypatch.setattr(actions.random, "choice", lambda brokers: 2)
    call = {"leader-kill": "kill", "leader-restart": "stop", "leader-pause": "pause"}[fault]
    quiet = FakeCluster()
    event = run(quiet, step_of(fault, target=target))
    assert not event.effective and event.effect == f"{call} of broker 2: no effect seen within 0s", event.effect
    quiet.assert_undone()

    cluster = FakeCluster()
    cluster.when(call, fenced(2))
    event = run(cluster, step_of(fault, target=target))
    assert event.effective and event.effect.startswith("broker 2 fenced in "), event.effect
    cluster.assert_undone()


@pytest.mark.parametrize("replicas", [(1,), (1, 2)])
def test_field_note_7_kill_of_broker_2_is_judged_by_its_fencing(replicas: tuple[int, ...]) -> None:
    """The field-notes-7 presets: two brokers, topics of RF=1 or 2 with partition 0 led by broker 1,
    `leader-kill` of `broker:2`: not effective on the spot (partition 0's leader never was 2)."""
    quiet = FakeCluster(brokers=(1, 2), replicas=replicas, controller=1, voters=(1,))
    assert not run(quiet, step_of("leader-kill", target="broker:2"), min_insync_replicas=1).effective
    cluster = FakeCluster(brokers=(1, 2), replicas=replicas, controller=1, voters=(1,))
    cluster.when("kill", fenced(2))
    event = run(cluster, step_of("leader-kill", target="broker:2"), min_insync_replicas=1)
    assert event.effective and event.effect.startswith("broker 2 fenced in "), event.effect


def test_a_broker_target_that_leads_the_partition_is_judged_by_the_leader_moving() -> None:
    cluster = FakeCluster()
    cluster.when("kill", leader_moves_to(3))
    event = run(cluster, step_of("leader-kill", target="broker:1"))
    assert event.effective and event.effect.startswith("leader of partition 0 moved 1 -> 3 in "), event.effect


def test_replicas_down_stops_the_followers_together_and_starts_each() -> None:
    cluster = FakeCluster()
    cluster.when("stop", isr_loses(2, 3))
    event = run(cluster, step_of("replicas-down"))
    assert event.effective and event.target == "followers [2, 3] of leader:0 (leader 1)"
    assert sorted(cluster.called("stop")) == sorted(cluster.called("start")) == [2, 3]


def test_rolling_restart_cut_short_restarted_only_some_brokers() -> None:
    cluster = FakeCluster()
    step = step_of("rolling-restart")
    aborted = window(step)
    cluster.when("start", lambda _: aborted.stop.set())  # the schedule is aborted during the first restart
    cluster.when("stop", nothing)
    event = run(cluster, step, on=aborted)
    assert not event.effective and event.effect == "restarted only brokers [1]"
    assert cluster.called("stop") == cluster.called("start") == [1]


@pytest.mark.parametrize("fault", ["leader-isolate", "node-isolate", "split", "one-way-cut"])
def test_a_cut_whose_effect_shows_only_after_the_heal_is_effective(fault: str) -> None:
    case = CASES[fault]
    cluster = FakeCluster()
    cluster.when("heal", case.change)
    event = run(cluster, step_of(fault))
    assert event.effective and event.effect.startswith(case.effect) and event.effect.endswith(" (after the heal)"), event.effect
    assert event.effective_at is not None and event.effective_at >= event.ended  # type: ignore[operator]
    assert event.counts == {"dropped_packets": 0}
    cluster.assert_undone()


def test_an_aftermath_beyond_its_time_is_not_seen() -> None:
    cluster = FakeCluster()
    cluster.when("heal", leader_moves_to(2), after=50)  # later than any read the aftermath makes
    event = run(cluster, step_of("leader-isolate"))
    assert not event.effective and event.effect == NO_CUT_EFFECT


def test_leader_isolate_counts_only_a_leader_move() -> None:
    """Other cuts count an ISR shrink, a fenced broker or a moved controller; leader-isolate only
    leadership leaving the isolated leader."""
    cluster = FakeCluster()
    cluster.when("cut", all_of(isr_loses(2, 3), fenced(1), controller_moves_to(2)))
    event = run(cluster, step_of("leader-isolate"))
    assert not event.effective and event.effect == NO_CUT_EFFECT
    assert cluster.called("heal") == cluster.called("cut")


def test_a_lossy_link_is_counted_not_polled() -> None:
    cluster = FakeCluster()
    cluster.when("cut", packets_dropped(5))
    event = run(cluster, step_of("lossy-link", options={"probability": 0.5}))
    assert event.action == "drop 0.5" and event.effective and event.effect == "5 packets dropped"
    assert event.counts == {"dropped_packets": 5} and event.effective_at == event.started
    ((pairs, probability),) = cluster.links().history
    assert probability == 0.5 and sorted(pairs) == [(1, 2), (1, 3), (2, 1), (3, 1)]


@pytest.mark.parametrize(
    ("counts", "effective"),
    [
        ({"blackholed_responses": 2}, True),  # only responses of requests already in flight were swallowed
        ({"blackholed_requests": 4}, True),
        ({"blackholed_requests": 1, "blackholed_responses": 1}, True),
        ({"requests.3.v12": 5, "connections": 2}, False),  # traffic, but nothing blackholed
    ],
)
def test_client_partition_counts_blackholed_requests_and_responses(counts: dict[str, int], effective: bool) -> None:
    cluster = FakeCluster()
    cluster.proxy().counters[1].update({"blackholed_requests": 7, "blackholed_responses": 7})  # an earlier fault's
    cluster.when("set_rule", counted(1, **counts))
    event = run(cluster, step_of("client-partition"))
    assert event.effective is effective and event.counts == counts
    requests, responses = counts.get("blackholed_requests", 0), counts.get("blackholed_responses", 0)
    assert event.effect == f"proxy blackholed requests {requests}, blackholed responses {responses} on broker 1"
    assert (event.effective_at == event.started) if effective else event.effective_at is None
    assert cluster.called("set_rule") == cluster.called("clear") == [1]


def test_a_proxy_rule_carries_the_step_options_and_outlives_the_window() -> None:
    cluster = FakeCluster()
    run(cluster, step_of("ack-loss", options={"probability": 0.5, "then": "hold"}))
    ((broker, rule),) = cluster.proxy().history
    assert broker == 1 and (rule.action, rule.options.probability, rule.options.then, rule.options.apis) == ("drop_response", 0.5, "hold", [0])
    assert rule.expires_in_s == DURATION_S + 5


def test_a_fault_on_every_broker_counts_the_proxy_counters_of_all_of_them() -> None:
    from acklab.nemesis.actions import _summed

    stats = {1: {"injected_errors": 2, "connections": 4}, 2: {"injected_errors": 3}, 3: {"injected_errors": 9}}
    assert _summed(stats, [1, 2]) == {"injected_errors": 5, "connections": 4}
    assert _summed(stats, [3]) == {"injected_errors": 9}


# ---- processor faults ----------------------------------------------------------------------------


def test_a_processor_kill_kills_at_the_point_and_restarts_after_the_window_with_its_intervention() -> None:
    cluster = FakeCluster()
    event = run(cluster, step_of("processor-kill"))
    assert [c for c, _ in cluster.calls] == ["arm", "kill_processor", "restart_processor"]
    (hit,) = event.interventions
    assert {k: hit[k] for k in ("topic", "kind", "instance", "incarnation", "txn", "generation")} == {
        "topic": TOPIC, "kind": "processor-kill", "instance": 0, "incarnation": 0, "txn": 4, "generation": 1,
    }
    assert hit["point_at"] <= hit["killed_at"] <= hit["restarted_at"]


def test_a_zombie_whose_group_never_moves_on_is_ineffective_and_still_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "MOVE_ON_GRACE_S", 0.3)
    cluster = FakeCluster()
    event = run(cluster, step_of("zombie"))
    assert not event.effective
    assert event.effect == f"processor 0: the group of {TOPIC} did not move past generation 1"
    assert cluster.called("resume_processor") == [0] and event.interventions[0].get("moved_on") is None
    cluster.assert_undone()


def test_a_zombie_is_resumed_only_once_its_group_moved_on() -> None:
    cluster = FakeCluster()
    cluster.moved = True
    event = run(cluster, step_of("zombie"))
    (hit,) = event.interventions
    assert hit["moved_on"]["generation"] == 2 and hit["resumed_at"] >= hit["moved_on"]["t"]


def intervention(hit: dict[str, Any]) -> Intervention:
    """An intervention as the manifest records it: only documented fields (`acklab.store.runs.Intervention`)."""
    assert set(hit) <= set(Intervention.model_fields), set(hit) - set(Intervention.model_fields)
    return Intervention.model_validate(hit)


def test_a_processor_kill_hits_every_pipeline_and_restarts_each_only_after_the_window() -> None:
    cluster = FakeCluster()
    other = FakeProcessors(cluster, group_id="g2")
    step = step_of("processor-kill")
    opened = time.time()
    event = run(cluster, step, processors={TOPIC: cluster.processors, "u": other})
    assert event.effective and event.effect == "killed processor 0 at its point in 2 pipeline(s)", event.effect
    assert cluster.processors.calls == other.calls == ["arm", "kill", "restart"]
    hits = {hit["topic"]: intervention(hit) for hit in event.interventions}
    assert sorted(hits) == [TOPIC, "u"]
    for hit in hits.values():
        assert (hit.kind, hit.instance, hit.moved_on, hit.resumed_at) == ("processor-kill", 0, None, None)
        assert hit.killed_at is not None and hit.restarted_at is not None
        assert hit.point_at <= hit.killed_at <= opened + step.duration_s <= hit.restarted_at  # dead for the whole window
    cluster.assert_undone()
    assert not other.stopped and not other.dead


def test_a_processor_kill_that_misses_one_pipeline_is_ineffective_and_still_restarts_the_one_it_killed() -> None:
    cluster = FakeCluster()
    missed = FakeProcessors(cluster, group_id="g2", reaches_point=False)
    event = run(cluster, step_of("processor-kill"), processors={TOPIC: cluster.processors, "u": missed})
    assert not event.effective and event.effective_at is None and event.effect == "processor 0 not hit at its point: no point", event
    assert cluster.processors.calls == ["arm", "kill", "restart"] and missed.calls == ["arm"]  # never killed what was not at its point
    (hit,) = map(intervention, event.interventions)
    assert hit.topic == TOPIC and hit.killed_at is not None and hit.restarted_at is not None and hit.restarted_at >= hit.killed_at
    cluster.assert_undone()


def test_a_zombie_is_paused_for_the_whole_window_and_its_intervention_documented() -> None:
    cluster = FakeCluster()
    cluster.moved = True  # the group moved on at once: the zombie still stays paused until the window is over
    step = step_of("zombie", duration_s=0.3)
    opened = time.time()
    event = run(cluster, step)
    assert event.effective and event.effect == "processor 0 paused at its point until its group moved on (generation 2) in 1 pipeline(s)"
    assert cluster.processors.calls == ["arm", "resume"]  # never killed
    (hit,) = map(intervention, event.interventions)
    assert (hit.topic, hit.kind, hit.instance, hit.incarnation, hit.txn, hit.generation) == (TOPIC, "zombie", 0, 0, 4, 1)
    assert hit.killed_at is None and hit.restarted_at is None and hit.moved_on is not None and hit.resumed_at is not None
    assert set(hit.moved_on) == {"generation", "instance", "t"} and hit.moved_on["generation"] > hit.generation
    assert hit.point_at <= opened + step.duration_s <= hit.resumed_at
    cluster.assert_undone()


def test_a_zombie_whose_group_moved_on_in_only_one_pipeline_is_ineffective_and_both_are_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "MOVE_ON_GRACE_S", 0.3)
    cluster = FakeCluster()
    cluster.moved = True
    stuck = FakeProcessors(cluster, group_id="g2", moves_on=False)
    event = run(cluster, step_of("zombie"), processors={TOPIC: cluster.processors, "u": stuck})
    assert not event.effective and event.effect == "processor 0: the group of u did not move past generation 1", event.effect
    assert cluster.processors.calls == stuck.calls == ["arm", "resume"]
    hits = {hit["topic"]: intervention(hit) for hit in event.interventions}
    assert hits[TOPIC].moved_on is not None and hits["u"].moved_on is None
    assert all(hit.resumed_at is not None for hit in hits.values())
    cluster.assert_undone()
    assert not stuck.stopped


@pytest.mark.parametrize("fault", ["processor-kill", "zombie"])
def test_a_processor_fault_in_a_group_without_pipelines_does_nothing(fault: str) -> None:
    cluster = FakeCluster()
    settled = threading.Event()
    step = step_of(fault)
    event = ACTIONS[fault](FaultContext(cluster, TOPIC, 2, settled), step, window(step))  # type: ignore[arg-type]
    assert not event.effective and event.effect == "no pipeline processors in this group" and not event.interventions
    assert not cluster.calls and settled.is_set()


# ---- coordinator faults --------------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "asked"), [("group-coordinator-kill", ["__consumer_offsets"]), ("txn-coordinator-kill", ["__transaction_state"])])
def test_a_coordinator_kill_kills_the_first_pipelines_coordinator_and_starts_it_after_the_window(fault: str, asked: list[str]) -> None:
    """The group coordinator is the leader of the `__consumer_offsets` partition the first pipeline's
    group id hashes to; the transaction coordinator the leader of the `__transaction_state` partition
    `g-p0` hashes to (the fake leads every other partition by another broker)."""
    cluster = FakeCluster()
    cluster.when("kill", coordinator_moves_to(3), after=1)  # the second look after the kill (0.2 s later) sees it
    first, second = FakeProcessors(cluster), FakeProcessors(cluster, group_id="g2")
    event = run(cluster, step_of(fault, duration_s=0.6), processors={TOPIC: first, "u": second})
    assert event.target == f"broker:1 ({fault.removesuffix('-kill')})" and event.action == "kill"
    assert event.effective and event.effect.startswith(f"{fault.removesuffix('-kill')} moved 1 -> 3 in "), event.effect
    assert cluster.called("kill") == cluster.called("start") == [1] and cluster.calls.index(("kill", 1)) < cluster.calls.index(("start", 1))
    assert set(cluster.asked) == set(asked) and not first.calls and not second.calls  # the processors themselves untouched
    cluster.assert_undone()


def test_the_transaction_coordinator_is_looked_up_by_the_hash_of_instance_0s_transactional_id() -> None:
    """Java's `"g-p0".hashCode()` is 3,115,238 (38 mod 50): the partition the fake cluster's coordinator leads."""
    assert processing.transactional_id("g", 0) == "g-p0"
    assert actions.java_hash("g-p0") == 3115238 and actions.java_hash("g-p0") % 50 == TXN_PARTITION
    assert actions.java_hash("g") == 103 and actions.java_hash("g") % 4 == OFFSETS_PARTITION


@pytest.mark.parametrize("fault", ["group-coordinator-kill", "txn-coordinator-kill"])
def test_a_coordinator_kill_in_a_group_without_pipelines_kills_nothing(fault: str) -> None:
    cluster = FakeCluster()
    settled = threading.Event()
    step = step_of(fault)
    event = ACTIONS[fault](FaultContext(cluster, TOPIC, 2, settled), step, window(step))  # type: ignore[arg-type]
    assert not event.effective and event.effect == f"{fault.removesuffix('-kill')} resolved to no broker", event.effect
    assert not cluster.calls and not cluster.admins and settled.is_set()


def test_a_coordinator_that_is_unknown_after_the_kill_is_no_effect() -> None:
    """While no broker coordinates the group (-1), the coordinator has not moved yet."""
    cluster = FakeCluster()
    cluster.when("kill", coordinator_moves_to(-1))
    event = run(cluster, step_of("group-coordinator-kill"))
    assert not event.effective and event.effect == "kill of broker 1: no effect seen within 0s", event.effect
    cluster.assert_undone()

"""How each fault mechanism (`acklab.nemesis.faults`) is applied, undone and confirmed on a cluster:
one implementation per mechanism, chosen by the fault's spec. A fault that did not take effect is
reported as such (never green)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from acklab.cluster.admin import ClusterAdmin
from acklab.cluster.cluster import Cluster
from acklab.nemesis.events import FaultEvent, Window
from acklab.nemesis.faults import (
    COORDINATORS,
    FAULTS,
    TO_LOAD_END_CEILING_S,
    FaultSpec,
    Links,
    Process,
    ProcessorOptions,
    ProcessorSignal,
    Proxy,
    ReplicasDown,
    RollingRestart,
)
from acklab.nemesis.schedule import FaultStep, Target
from acklab.proxy.behaviours.base import Behaviour
from acklab.proxy.control import ProxyControl
from acklab.proxy.rules import ProxyRule


class Processors(Protocol):
    """A pipeline's processor instances as a processor fault acts on them
    (`acklab.workload.processors.ProcessorGroup`); a call that cannot do what it is asked in time
    raises a RuntimeError."""

    @property
    def group_id(self) -> str: ...

    def transactional_id(self, number: int) -> str: ...

    def arm(self, number: int, timeout_s: float, stop: Callable[[], bool]) -> dict[str, Any]: ...

    def kill(self, number: int) -> int: ...

    def restart(self, number: int) -> object: ...

    def resume(self, number: int) -> None: ...

    def moved_on(self, number: int, since: float, generation: int) -> dict[str, Any] | None: ...


class ProxyClaims:
    """Which step's proxy rule each broker holds now: a broker's proxy has one rule at a time, so of
    two overlapping proxy steps that resolve to one broker the later is not applied."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[int, str] = {}

    def claim(self, brokers: list[int], fault: str) -> tuple[int, str] | None:
        """Claim `brokers` for `fault`: None, or (a broker, the fault holding it) and nothing claimed."""
        with self._lock:
            if held := next(((b, self._holders[b]) for b in brokers if b in self._holders), None):
                return held
            self._holders.update(dict.fromkeys(brokers, fault))
            return None

    def release(self, brokers: list[int]) -> None:
        with self._lock:
            for broker in brokers:
                self._holders.pop(broker, None)


@dataclass(frozen=True)
class FaultContext:
    """What a fault acts on: the cluster, the scenario's topic and, in a group with pipelines, their
    processors (`processors`). `settled` is set once a process fault has shown its effect or given up
    looking (a step before the load lets the producers start then); `proxy_claims`, the brokers whose
    proxy holds a step's rule (overlapping steps run together)."""

    cluster: Cluster
    topic: str
    min_insync_replicas: int
    settled: threading.Event = field(default_factory=threading.Event)
    processors: Mapping[str, Processors] = field(default_factory=dict)  # a group's pipelines: input topic -> its processors
    proxy_claims: ProxyClaims = field(default_factory=ProxyClaims)


Apply = Callable[[FaultContext, FaultStep, Window], FaultEvent]


# ---- target resolution --------------------------------------------------------------------


def resolve(ctx: FaultContext, target: Target) -> int:
    """The node id a target names right now."""
    if target.kind in ("leader", "follower"):
        state = ctx.cluster.partition(target.topic or ctx.topic, target.partition)
        if target.kind == "leader":
            return state.leader
        followers = [b for b in state.isr if b != state.leader]
        return followers[0] if followers else -1
    if target.kind == "controller":
        return ctx.cluster.active_controller()
    if target.kind in COORDINATORS:
        return coordinator(ctx, target.kind)
    if target.kind == "broker":
        assert target.broker is not None
        return target.broker
    with ctx.cluster.admin(timeout_s=5) as admin:
        return random.choice(sorted(admin.broker_ids()))


def coordinator(ctx: FaultContext, kind: str, admin: ClusterAdmin | None = None) -> int:
    """The broker coordinating the first pipeline's consumer group (`group-coordinator`) or the
    transactions of its instance 0 (`txn-coordinator`): the leader of the `__consumer_offsets` /
    `__transaction_state` partition its group id / transactional id hashes to, as the broker maps it
    (from metadata alone, so a look stays quick while a coordinator is down); -1 if the group has no
    pipeline. `admin`: a client to ask (default: a new one)."""
    if not ctx.processors:
        return -1
    processors = next(iter(ctx.processors.values()))
    topic, key = (OFFSETS, processors.group_id) if kind == "group-coordinator" else (TRANSACTION_STATE, processors.transactional_id(0))
    with nullcontext(admin) if admin is not None else ctx.cluster.admin(timeout_s=5) as client:
        partitions = client.partitions(topic)
    return partitions[java_hash(key) % len(partitions)].leader


OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"


def java_hash(text: str) -> int:
    """Kafka's `Utils.abs(text.hashCode())`: Java's String hash, made non-negative as Kafka does."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h)


def _poll(window: Window, check: Callable[[], str | None], interval_s: float = 0.2) -> tuple[str | None, float | None]:
    """Call `check` until it returns an effect description or the window ends: (the effect or None,
    when the last look that did not see it began, or None if none missed it)."""
    missed = None
    while True:
        looked = time.time()
        try:
            effect = check()
        except Exception:
            effect = None
        if effect is not None or window.sleep(interval_s):
            return effect, missed
        missed = looked


# ---- process faults -----------------------------------------------------------------------


def _process_fault(action: Literal["kill", "stop", "pause"]) -> Apply:
    """Kill / stop / pause the target's process, confirm the cluster noticed, undo after the window."""

    def apply(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
        target = step.parsed_target
        victim = resolve(ctx, target)
        event = FaultEvent(step.fault, f"broker:{victim} ({step.target})", action)
        if victim < 0:
            event.ended, event.effect = time.time(), f"{step.target} resolved to no broker"
            ctx.settled.set()
            return event
        controller = victim if target.kind == "controller" else None
        alone = _nothing_can_move(ctx, target, victim)
        # A broker target need not lead the target partition: only a leader's leadership can move.
        led = target.kind == "leader" or (
            target.kind in ("broker", "random-broker")
            and ctx.cluster.partition(target.topic or ctx.topic, target.partition).leader == victim
        )
        {"kill": ctx.cluster.kill, "stop": ctx.cluster.stop, "pause": ctx.cluster.pause}[action](victim)
        started = time.monotonic()
        admin = ctx.cluster.admin(timeout_s=1.0, exclude=[victim])
        try:
            if alone:  # nothing can lead, fence or take over in its place: the effect is the process itself, down or frozen
                def check() -> str | None:
                    down = ctx.cluster.is_paused(victim) if action == "pause" else not ctx.cluster.is_running(victim)
                    return f"broker {victim} {'frozen' if action == 'pause' else 'down'}, {alone}" if down else None
            elif target.kind in ("leader", "broker", "random-broker"):
                def check() -> str | None:
                    if led and (state := admin.partition(target.topic or ctx.topic, target.partition)).leader not in (-1, victim):
                        return f"leader of partition {target.partition} moved {victim} -> {state.leader}"
                    if target.kind != "leader" and victim not in admin.broker_ids():  # the controller noticed
                        return f"broker {victim} fenced"
                    return None
            elif target.kind in COORDINATORS:
                def check() -> str | None:
                    now = coordinator(ctx, target.kind, admin)
                    return f"{target.kind} moved {victim} -> {now}" if now not in (-1, victim) else None
            elif target.kind == "follower":
                def check() -> str | None:
                    state = admin.partition(target.topic or ctx.topic, target.partition)
                    return f"follower {victim} left the ISR {list(state.isr)}" if victim not in state.isr else None
            else:
                def check() -> str | None:
                    now = ctx.cluster.active_controller()
                    return f"active controller moved {controller} -> {now}" if now not in (-1, controller) else None
            effect, missed = _poll(window, check)
            event.observe(
                effect and f"{effect} in {time.monotonic() - started:.1f}s",
                f"{action} of broker {victim}: no effect seen within {step.duration_s:.0f}s",
                missed,
            )
            ctx.settled.set()
            window.wait_out()
        finally:
            admin.close()
            (ctx.cluster.resume if action == "pause" else ctx.cluster.start)(victim)
            event.ended = time.time()
        return event

    return apply


def _nothing_can_move(ctx: FaultContext, target: Target, victim: int) -> str | None:
    """Why the cluster cannot react to the victim's loss, if it cannot: the victim holds the target
    partition's only replica (RF=1, or a single broker), so leadership cannot move; or it is the only
    KRaft controller, so no leader can be elected, no broker fenced, no controller take over."""
    if len(ctx.cluster.topology.broker_ids) == 1:
        return f"the only replica of partition {target.partition}: no leader can take over"
    if target.kind in ("leader", "follower"):
        replicas = ctx.cluster.partition(target.topic or ctx.topic, target.partition).replicas
        if set(replicas) == {victim}:
            return f"the only replica of partition {target.partition}: no leader can take over"
    if ctx.cluster.topology.controller_ids == [victim]:
        return "the only KRaft controller: no leader can move and no broker be fenced"
    return None


def _rolling_restart(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
    """Clean restart of every broker in turn, each back in the ISR before the next (takes as long as needed)."""
    event = FaultEvent(step.fault, "all brokers", "rolling-restart")
    restarted = []
    with ctx.cluster.admin(timeout_s=5) as admin:
        for broker in sorted(admin.broker_ids()):
            if window.stop.is_set():
                break
            ctx.cluster.stop(broker)
            ctx.cluster.start(broker)
            admin.wait_in_sync(ctx.topic, 120)
            restarted.append(broker)
    event.observe(f"restarted brokers {restarted} in turn" if len(restarted) == len(ctx.cluster.topology.broker_ids) else None,
                  f"restarted only brokers {restarted}")
    if event.effective:  # in effect from the first stop on
        event.effective_at = event.started
    event.ended = time.time()
    return event


def _replicas_down(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
    """Stop enough followers of the target partition that its ISR falls below min.insync.replicas."""
    target = step.parsed_target
    state = ctx.cluster.partition(target.topic or ctx.topic, target.partition)
    followers = [b for b in state.replicas if b != state.leader]
    count = step.options.get("count") or len(state.replicas) - ctx.min_insync_replicas + 1
    victims = followers[:count]
    event = FaultEvent(step.fault, f"followers {victims} of {step.target} (leader {state.leader})", "stop")
    started = time.monotonic()  # a controlled shutdown under load takes seconds: the effect is timed from here
    with ThreadPoolExecutor(len(victims)) as pool:  # together: the ISR must shrink while the load runs
        list(pool.map(ctx.cluster.stop, victims))
    admin = ctx.cluster.admin(timeout_s=5)
    try:
        def check() -> str | None:
            isr = admin.partition(target.topic or ctx.topic, target.partition).isr
            return f"ISR {list(isr)} below min.insync.replicas={ctx.min_insync_replicas}" if len(isr) < ctx.min_insync_replicas else None

        effect, missed = _poll(window, check)
        event.observe(effect and f"{effect} in {time.monotonic() - started:.1f}s", f"stopped {victims}; ISR never fell below {ctx.min_insync_replicas}", missed)
        window.wait_out()
    finally:
        admin.close()
        for victim in victims:
            ctx.cluster.start(victim)
        event.ended = time.time()
    return event


# ---- proxy faults -------------------------------------------------------------------------


def _proxy_fault(behaviour: Behaviour) -> Apply:
    """Install a proxy rule of `behaviour` on the target broker for the window; effective if the proxy
    counted any frame it acted on (any of the behaviour's counters: requests, or responses of
    requests already in flight). A behaviour that logs each request it acted on (`Behaviour.log`)
    puts that log in the event."""
    action, counters = behaviour.name, behaviour.counters

    def apply(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
        every = step.parsed_target.kind == "every-broker"
        victims = ctx.cluster.topology.broker_ids if every else [resolve(ctx, step.parsed_target)]
        where = f"brokers {', '.join(map(str, victims))}" if every else f"broker {victims[0]}"
        event = FaultEvent(step.fault, f"{where} ({step.target})" if every else f"broker:{victims[0]} ({step.target})", action)
        if held := ctx.proxy_claims.claim(victims, step.fault):  # an overlapping step's rule is on that broker: not applied
            event.observe(None, f"not applied: broker {held[0]}'s proxy holds the rule of {held[1]}, an overlapping step")
            event.ended = time.time()
            ctx.settled.set()  # given up: a step before the load lets the producers start
            return event
        try:
            return _apply_rule(ctx, step, window, event, victims, where)
        finally:
            ctx.proxy_claims.release(victims)

    def _apply_rule(ctx: FaultContext, step: FaultStep, window: Window, event: FaultEvent, victims: list[int], where: str) -> FaultEvent:
        proxy = ctx.cluster.proxy()
        before = _summed(proxy.stats(), victims)
        lasts = TO_LOAD_END_CEILING_S if FAULTS[step.fault].to_load_end else step.duration_s
        # the behaviour's options model (or a variant of it), completed from the cluster where it needs to be
        options = FAULTS[step.fault].options.model_validate(step.options).at_start(_Facts(ctx))
        rule = ProxyRule(action=action, options=options, expires_in_s=lasts + 5)  # type: ignore[arg-type]
        for victim in victims:
            proxy.set_rule(victim, rule)
        ctx.settled.set()  # in effect from here: a step before the load lets the producers start
        try:
            window.wait_out()
        finally:
            for victim in victims:
                proxy.clear(victim)
            event.ended = time.time()
        if behaviour.log == "withheld":
            event.withheld = [entry for victim in victims for entry in _withheld(proxy, victim)]
        elif behaviour.log == "swallowed":
            event.swallowed = [entry for victim in victims for entry in proxy.swallowed(victim)]
        elif behaviour.log is not None:  # complete once the broker answered each entry that waits for an answer
            setattr(event, behaviour.log, [entry for victim in victims for entry in _answered_log(proxy, victim, behaviour.log)])
        after = _summed(proxy.stats(), victims)
        event.counts = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        affected = sum(event.counts.get(counter, 0) for counter in counters)
        seen = ", ".join(f"{counter.replace('_', ' ')} {event.counts.get(counter, 0)}" for counter in counters)
        event.observe(f"proxy {seen} on {where}" if affected else None, f"proxy {seen} on {where}")
        if affected:  # the proxy counted requests of the load inside the window
            event.effective_at = event.started
        return event

    return apply


@dataclass(frozen=True)
class _Facts:
    """`ClusterFacts` of a fault's context, read from the cluster's metadata when asked."""

    ctx: FaultContext

    def leaders(self) -> dict[int, int]:
        with self.ctx.cluster.admin() as admin:
            return {state.partition: state.leader for state in admin.partitions(self.ctx.topic) if state.leader >= 0}


def _summed(stats: Mapping[int, Mapping[str, int]], brokers: list[int]) -> Counter[str]:
    """The proxy counters of `brokers`, added up."""
    total: Counter[str] = Counter()
    for broker in brokers:
        total.update(stats.get(broker, {}))
    return total


def _withheld(proxy: ProxyControl, broker: int, answers_within_s: float = 5.0) -> list[dict]:
    """The broker's withheld requests, once each replayed one has its answer (or after `answers_within_s`)."""
    deadline = time.monotonic() + answers_within_s
    while True:
        log = proxy.withheld(broker)
        if all("answer" in entry for entry in log if entry.get("released_at")) or time.monotonic() > deadline:
            return log
        time.sleep(0.1)


def _answered_log(proxy: ProxyControl, broker: int, name: str, answers_within_s: float = 5.0) -> list[dict]:
    """The broker's log `name`, once the broker answered each of its entries that waits for an answer
    (`answered`; an entry without it is complete) or after `answers_within_s`."""
    deadline = time.monotonic() + answers_within_s
    while True:
        log = proxy.log(broker, name)
        if all(entry.get("answered", True) for entry in log) or time.monotonic() > deadline:
            return log
        time.sleep(0.1)


# ---- link faults ---------------------------------------------------------------------------

# How long a cut's effect is still looked for after the heal. A leader that is also the active
# controller, cut off, is fenced by the newly elected controller a session timeout after that one
# took over, or within seconds of the heal while it looks for the new controller; 10 s after the
# heal covers both for the standard 10 s cut.
AFTERMATH_S = 10.0


def cut_pairs(step: FaultStep, victim: int, nodes: list[int]) -> list[tuple[int, int]]:
    """The (sender, receiver) node pairs whose packets a link fault drops."""
    options, links = step.options, FAULTS[step.fault].mechanism
    assert isinstance(links, Links), step.fault
    if links.pairs == "split":
        side = {victim, *options["side"]}
        return [(a, b) for a in nodes for b in nodes if (a in side) != (b in side)]
    peers = [n for n in (options.get("peers") or nodes) if n != victim]
    if links.pairs == "one-way":
        return [(victim, p) if options["direction"] == "out" else (p, victim) for p in peers]
    return [pair for p in peers for pair in ((victim, p), (p, victim))]


def _link_fault(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
    """Cut (or, lossy-link, thin out) links between nodes for the window, then heal. Effective when
    the cluster shows it (`Links.seen`): `leader-moved` once leadership left the isolated leader;
    `reacted` once a broker at either end is fenced, the target partition's leader moved or its ISR
    shrank, or the active controller moved; a partial cut (`probability` < 1) once packets were dropped."""
    target = step.parsed_target
    topic = target.topic or ctx.topic
    victim = resolve(ctx, target)
    pairs = cut_pairs(step, victim, ctx.cluster.topology.node_ids) if victim >= 0 else []
    involved = sorted({node for pair in pairs for node in pair})
    probability = step.options.get("probability", 1.0)
    event = FaultEvent(step.fault, f"node {victim} ({step.target}); links {_describe(pairs)}", "cut" if probability == 1 else f"drop {probability:g}")
    if not pairs:
        event.ended, event.effect = time.time(), f"{step.target} resolved to node {victim}: no link to cut"
        return event
    before = ctx.cluster.partition(topic, target.partition)
    controller = ctx.cluster.active_controller()
    links = ctx.cluster.links()
    fault = links.cut(pairs, probability)
    started = time.monotonic()
    admin = ctx.cluster.admin(timeout_s=1.0, exclude=[victim])
    brokers = set(ctx.cluster.topology.broker_ids)
    mechanism = FAULTS[step.fault].mechanism
    only_leader_moves = isinstance(mechanism, Links) and mechanism.seen == "leader-moved"

    def check() -> str | None:
        state = admin.partition(topic, target.partition)
        moved = before.leader in involved and state.leader not in (-1, before.leader)
        seen = [f"leader of {topic}[{target.partition}] moved {before.leader} -> {state.leader}"] if moved else []
        if only_leader_moves:
            return seen[0] if seen else None
        if fenced := sorted((brokers & set(involved)) - admin.broker_ids()):
            seen.append(f"broker(s) {fenced} fenced")
        if shrunk := sorted(set(before.isr) - set(state.isr)):
            seen.append(f"ISR {list(before.isr)} -> {list(state.isr)} (without {shrunk})")
        if (now := ctx.cluster.active_controller()) not in (-1, controller):
            seen.append(f"active controller moved {controller} -> {now}")
        return "; ".join(seen) or None

    def observe(effect: str | None, missed: float | None, when: str = "") -> None:
        event.observe(
            effect and f"{effect} in {time.monotonic() - started:.1f}s{when}", f"links cut; no effect seen within {step.duration_s:.0f}s (+{AFTERMATH_S:g}s)",
            missed,
        )

    with admin:
        missed = None
        try:
            if probability == 1:
                effect, missed = _poll(window, check)
                if effect is not None:
                    observe(effect, missed)
            window.wait_out()
            event.counts = {"dropped_packets": links.dropped(fault)}
        finally:
            links.heal(fault)
            event.ended = time.time()
        if probability == 1 and not event.effective:  # a timer that ran out during the cut may act just after the heal
            effect, missed_after = _poll(Window(time.monotonic() + AFTERMATH_S, window.stop), check)
            observe(effect, missed_after or missed, " (after the heal)")
    if probability != 1:
        dropped = event.counts["dropped_packets"]
        event.observe(f"{dropped} packets dropped" if dropped else None, "no packet dropped")
        if dropped:  # in effect from the start, like the proxy's drops
            event.effective_at = event.started
    return event


# ---- processor faults ---------------------------------------------------------------------

MOVE_ON_GRACE_S = 60.0  # a zombie's group gets this long past the window to move on before it is resumed anyway


def _processor_fault(kind: Literal["kill", "zombie"]) -> Apply:
    """Arm instance `instance` of every pipeline of the group, wait until each stopped itself at its
    point, then kill it (restart after the window) or keep it paused until its group moved on past
    its generation and the window is over (then resume it). Effective once every pipeline's
    instance was hit at its point (and, for a zombie, its group moved on)."""

    def apply(ctx: FaultContext, step: FaultStep, window: Window) -> FaultEvent:
        number = ProcessorOptions.model_validate(step.options).instance
        event = FaultEvent(step.fault, f"processor:{number}", kind)
        if not ctx.processors:
            event.ended, event.effect = time.time(), "no pipeline processors in this group"
            ctx.settled.set()
            return event
        hit: dict[str, dict] = {}
        missed: dict[str, str] = {}

        def arm(topic: str, group: Processors) -> None:
            try:
                hit[topic] = group.arm(number, max(1.0, window.end - time.monotonic()), lambda: window.over)
            except Exception as exc:  # the point not reached, or its log unreadable: not hit
                missed[topic] = str(exc)

        with ThreadPoolExecutor(len(ctx.processors), thread_name_prefix="arm") as pool:
            for topic, group in ctx.processors.items():
                pool.submit(arm, topic, group)
        records = {
            topic: {"topic": topic, "kind": step.fault, "instance": number, "incarnation": point["incarnation"], "txn": point["txn"],
                    "generation": point["generation"], "point_at": point["t"]}
            for topic, point in hit.items()
        }
        try:
            if kind == "kill":
                for topic in hit:
                    ctx.processors[topic].kill(number)
                    records[topic]["killed_at"] = time.time()
                effect = f"killed processor {number} at its point in {len(hit)} pipeline(s)" if hit and not missed else None
                event.observe(effect, f"processor {number} not hit at its point: {'; '.join(missed.values()) or 'the window ended'}")
                ctx.settled.set()
                window.wait_out()
            else:
                window.wait_out()  # paused for the whole window at least; when its group moved on is in its logs
                moved = _wait_moved_on(ctx, number, hit, window)
                for topic, found in moved.items():
                    records[topic]["moved_on"] = found
                stuck = sorted(set(hit) - set(moved))
                effect = (
                    f"processor {number} paused at its point until its group moved on (generation "
                    f"{', '.join(str(m['generation']) for m in moved.values())}) in {len(moved)} pipeline(s)"
                    if hit and not missed and not stuck else None
                )
                why = [*missed.values(), *(f"the group of {topic} did not move past generation {hit[topic]['generation']}" for topic in stuck)]
                event.observe(effect, f"processor {number}: {'; '.join(why) or 'not hit at its point'}")
                ctx.settled.set()
        finally:
            for topic in hit:
                group = ctx.processors[topic]
                if kind == "kill":
                    group.restart(number)
                    records[topic]["restarted_at"] = time.time()
                else:
                    group.resume(number)
                    records[topic]["resumed_at"] = time.time()
            event.interventions = list(records.values())
            event.ended = time.time()
        return event

    return apply


def _wait_moved_on(ctx: FaultContext, number: int, hit: Mapping[str, dict], window: Window) -> dict[str, dict]:
    """Per pipeline hit: the assignment of another instance that took its paused instance's
    partitions at a later generation, once seen; waits out the window, then up to
    `MOVE_ON_GRACE_S` more for the pipelines whose group has not moved on yet."""
    moved: dict[str, dict] = {}
    deadline = window.end + MOVE_ON_GRACE_S
    while True:
        for topic, point in hit.items():
            try:
                found = None if topic in moved else ctx.processors[topic].moved_on(number, point["t"], point["generation"])
            except Exception:  # a log not readable now: looked at again
                found = None
            if found is not None:
                moved[topic] = {"generation": found["generation"], "instance": found["instance"], "t": found["t"]}
        if window.over and (len(moved) == len(hit) or time.monotonic() > deadline or window.stop.is_set()):
            return moved
        time.sleep(0.2)


def _describe(pairs: list[tuple[int, int]]) -> str:
    """`1<->2, 1->3`: each cut link once, both directions as <->."""
    both = {tuple(sorted(pair)) for pair in pairs if pair[::-1] in pairs}
    one = [f"{a}->{b}" for a, b in pairs if tuple(sorted((a, b))) not in both]
    return ", ".join([f"{a}<->{b}" for a, b in sorted(both)] + one)


def _apply(spec: FaultSpec) -> Apply:
    """The action of a catalog fault, from its mechanism (`acklab.nemesis.faults`)."""
    mechanism = spec.mechanism
    if isinstance(mechanism, Process):
        return _process_fault(mechanism.signal)
    if isinstance(mechanism, Proxy):
        return _proxy_fault(mechanism.behaviour)
    if isinstance(mechanism, Links):
        return _link_fault
    if isinstance(mechanism, ReplicasDown):
        return _replicas_down
    if isinstance(mechanism, RollingRestart):
        return _rolling_restart
    if isinstance(mechanism, ProcessorSignal):
        return _processor_fault(mechanism.kind)
    raise ValueError(f"{spec.name}: no mechanism")


ACTIONS: Mapping[str, Apply] = {name: _apply(spec) for name, spec in FAULTS.items() if spec.mechanism is not None}
"""The action of every catalog fault but `none`."""

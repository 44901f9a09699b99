"""The processor instances of one pipeline: started, armed at their point, killed, restarted,
resumed, drained and stopped (`ProcessorGroup`). The contract of an instance is
`acklab.workload.processing`'s; its command is its client family's (`processor_command`).

Files, in the pipeline's folder: `processor-<i>.<n>.json` (the job of instance i, incarnation n),
`processor-<i>.<n>.jsonl` (its log) and `processor-<i>.<n>.stderr`.

Every instance is started with `parent_pid` set to this process, so it stops by itself when this
process is gone; `close` kills what is still running (resuming a stopped one first)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, KafkaException, TopicPartition

from acklab.workload import processing
from acklab.workload.client import Client, Family
from acklab.workload.processing import TRANSACTIONAL_STYLES, ProcessorJob, read_log

STOP_TIMEOUT_S = 45.0
"""How long a stopping instance may take: a client call that blocks when the stop comes may use its
own timeout (30 s, `acklab.workload.processor.STEP_S`) and 1 s more, then be abandoned (`overran`)."""

log = logging.getLogger(__name__)


class ProcessorError(RuntimeError):
    """An instance did not do what it was asked in time (never assigned, never reached its point)."""


@dataclass
class Instance:
    """One running (or ended) incarnation of an instance."""

    number: int
    incarnation: int
    process: subprocess.Popen[bytes]
    log: Path
    events_read: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        return list(read_log(self.log)) if self.log.exists() else []


class ProcessorGroup:
    """`instances` processor instances of `client` consuming `template.input_topic` in group
    `template.group_id` (the template's instance, incarnation, log and transactional id are set here)."""

    def __init__(self, family: Family, client: Client, folder: Path, template: ProcessorJob, instances: int) -> None:
        self.family, self.client, self.folder, self.template = family, client, folder, template
        self.count = instances
        self.current: dict[int, Instance] = {}
        self.ended: list[Instance] = []
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def group_id(self) -> str:
        return self.template.group_id

    def transactional_id(self, number: int) -> str:
        """The transactional.id instance `number` uses in a transactional style, in every incarnation."""
        return processing.transactional_id(self.template.group_id, number)

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        for number in range(self.count):
            self._spawn(number, 0)

    def _spawn(self, number: int, incarnation: int) -> Instance:
        stem = f"processor-{number}.{incarnation}"
        transactional_id = self.transactional_id(number) if self.template.style in TRANSACTIONAL_STYLES else None
        job = self.template.model_copy(
            update={"instance": number, "incarnation": incarnation, "log": str(self.folder / f"{stem}.jsonl"), "transactional_id": transactional_id,
                    "parent_pid": os.getpid()}
        )
        job_path = self.folder / f"{stem}.json"
        job_path.write_text(job.model_dump_json(indent=1))
        with (self.folder / f"{stem}.stderr").open("wb") as stderr:
            process = subprocess.Popen(
                self.family.processor_command(self.client, job_path), env=self.client.env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr,
            )
        instance = Instance(number, incarnation, process, Path(job.log))
        self.current[number] = instance
        return instance

    def restart(self, number: int) -> Instance:
        """A new incarnation of instance `number` (the last one must have ended)."""
        last = self.current[number]
        if last.process.poll() is None:
            raise ProcessorError(f"processor {number}: incarnation {last.incarnation} still running")
        self.ended.append(last)
        return self._spawn(number, last.incarnation + 1)

    def wait_assigned(self, partitions: int, timeout_s: float) -> None:
        """Until the group is consuming and balanced (`balanced`): every input partition held by one
        instance, and as many instances holding some as can (all of them, or `partitions`).
        A fault aimed at an instance needs it to hold partitions: under KIP-848 the broker hands a
        late member its share only over its next heartbeats, after the first member took them all."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if balanced([holdings(instance.events()) for instance in self.current.values()], partitions):
                return
            self._check_alive()
            time.sleep(0.2)
        held = {number: sorted(holdings(instance.events())) for number, instance in self.current.items()}
        raise ProcessorError(
            f"the processors did not share the {partitions} input partitions within {timeout_s:.0f}s (held: {held}; {self._stderr_tail()})"
        )

    def _check_alive(self) -> None:
        for instance in self.current.values():
            if instance.process.poll() is not None:
                raise ProcessorError(
                    f"processor {instance.number}.{instance.incarnation} exited with {instance.process.returncode}: {self._stderr_tail(instance)}"
                )

    def _stderr_tail(self, instance: Instance | None = None) -> str:
        instances = [instance] if instance else list(self.current.values())
        tails = []
        for one in instances:
            stderr = one.log.with_name(one.log.name.removesuffix(".jsonl") + ".stderr")
            text = stderr.read_text(errors="replace").strip() if stderr.exists() else ""
            if text:
                tails.append(f"{one.number}.{one.incarnation}: {text[-300:]}")
        return "; ".join(tails) or "no stderr"

    # ---- the point -----------------------------------------------------------------------------

    def arm(self, number: int, timeout_s: float, stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        """Arm instance `number` and wait until it logged its point and stopped itself; the `point`
        event, with the instance's `generation` (of the batch it stopped in), `instance` and `incarnation`."""
        instance = self.current[number]
        instance.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not stop():
            events = instance.events()
            point = next((e for e in reversed(events) if e["ev"] == "point"), None)
            if point is not None and _stopped(instance.process.pid):
                batch = next((e for e in reversed(events) if e["ev"] == "batch" and e["txn"] == point["txn"]), {})
                return {**point, "generation": batch.get("generation", -1), "instance": number, "incarnation": instance.incarnation}
            if instance.process.poll() is not None:
                break
            time.sleep(0.05)
        raise ProcessorError(f"processor {number}.{instance.incarnation} did not reach its point within {timeout_s:.0f}s")

    def kill(self, number: int) -> int:
        """SIGKILL instance `number`'s current incarnation; its exit status."""
        instance = self.current[number]
        instance.process.kill()
        return instance.process.wait(10)

    def resume(self, number: int) -> None:
        self.current[number].process.send_signal(signal.SIGCONT)

    def moved_on(self, number: int, since: float, generation: int) -> dict[str, Any] | None:
        """An `assigned` event of another instance, after `since`, at a generation above
        `generation`, that holds a partition instance `number` last held: the group moved on."""
        held = holdings(self.current[number].events())
        for other in self.current.values():
            if other.number == number:
                continue
            for event in other.events():
                if event["ev"] == "assigned" and event["t"] >= since and event["generation"] > generation and held & set(event["partitions"]):
                    return {**event, "instance": other.number}
        return None

    # ---- drain and stop ------------------------------------------------------------------------

    def committed(self, bootstrap: str, partitions: int, timeout_s: float = 30.0) -> dict[int, int]:
        """The group's committed offsets of the input topic (-1: none); KafkaException if the group
        coordinator does not answer within `timeout_s` (moved, loading, or not known yet)."""
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": self.template.group_id, "enable.auto.commit": False})
        try:
            found = consumer.committed([TopicPartition(self.template.input_topic, p) for p in range(partitions)], timeout_s)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found}

    def drain(self, bootstrap: str, ends: Mapping[int, int], timeout_s: float) -> dict[int, int]:
        """Wait until the group committed every input partition to its end offset `ends[p]` (or
        `timeout_s` passed); the committed offsets last read.

        A read that fails (the group coordinator moved or is loading: a coordinator kill can leave
        NOT_COORDINATOR for longer than one read's timeout) is tried again until `timeout_s`; if no
        read succeeded by then, the result is empty: every input counts as unprocessed, so the
        scenario is incomplete, never a pass."""
        deadline = time.monotonic() + timeout_s
        committed: dict[int, int] = {}
        while True:
            try:
                committed = self.committed(bootstrap, len(ends), max(1.0, min(30.0, deadline - time.monotonic())))
            except KafkaException as exc:
                log.warning("group %s: its committed offsets not read yet (%s)", self.template.group_id, exc)
            else:
                if all(committed.get(p, -1) >= end for p, end in ends.items()):
                    return committed
            if time.monotonic() > deadline:
                return committed
            time.sleep(0.5)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> dict[str, int | None]:
        """SIGTERM every current incarnation (resumed if stopped) and wait; those that outlast
        `timeout_s` get SIGQUIT (a stack dump into their stderr file), then SIGKILL. Exit status per `<instance>.<incarnation>` (None: killed here)."""
        for instance in self.current.values():
            if instance.process.poll() is None:
                instance.process.send_signal(signal.SIGTERM)
                instance.process.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + timeout_s
        statuses: dict[str, int | None] = {}
        for instance in self.current.values():
            try:
                statuses[f"{instance.number}.{instance.incarnation}"] = instance.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                instance.process.send_signal(signal.SIGQUIT)  # its threads' stacks to its stderr: where it was stuck
                time.sleep(1.0)
                instance.process.kill()
                instance.process.wait(10)
                statuses[f"{instance.number}.{instance.incarnation}"] = None
        return statuses

    def close(self) -> None:
        """Kill whatever is still running (idempotent)."""
        for instance in [*self.current.values(), *self.ended]:
            if instance.process.poll() is None:
                instance.process.send_signal(signal.SIGCONT)
                instance.process.kill()
                instance.process.wait(10)

    def events(self) -> dict[tuple[int, int], list[dict[str, Any]]]:
        """Every incarnation's log events, by (instance, incarnation)."""
        return {(i.number, i.incarnation): i.events() for i in [*self.ended, *self.current.values()]}


def holdings(events: list[dict[str, Any]]) -> set[int]:
    """The partitions an incarnation holds after `events`: its assignments replayed (an `assigned`
    adds, a `revoked` removes: incremental under KIP-848 and cooperative assignors; an eager
    assignor revokes everything before it assigns)."""
    held: set[int] = set()
    for event in events:
        if event["ev"] == "assigned":
            held |= set(event["partitions"])
        elif event["ev"] == "revoked":
            held -= set(event["partitions"])
    return held


def balanced(held: list[set[int]], partitions: int) -> bool:
    """Whether the instances' holdings (one set per instance) give each of the `partitions` input
    partitions to exactly one instance, with at least min(instances, partitions) instances holding
    some: none idle that could hold one."""
    every = [p for one in held for p in one]
    busy = sum(1 for one in held if one)
    return sorted(every) == list(range(partitions)) and busy >= min(len(held), partitions)


def _stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False

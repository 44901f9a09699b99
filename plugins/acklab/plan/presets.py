"""Named presets: a whole experiment (topology, profiles, fault schedule, load) under one name, with
where it comes from, what its source claims, and how each claim is checked against the run.

`acklab run --preset NAME`, `acklab presets`, the DAGs' `preset` param and the weekly
`kafka_field_notes` DAG run them; their run params are validated like any others (`acklab.plan.planner`).
A preset's observations are findings ("reproduced" or not, with what acklab measured); the run's
verdict stays the guarantee model's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from statistics import median
from typing import TYPE_CHECKING, Any, Literal

from acklab.base.spec import SpecError
from acklab.cluster.layout import SERVER_LOG
from acklab.workload.java_errors import java_names

if TYPE_CHECKING:
    from acklab.model.claims import Expectation
    from acklab.store.runs import Manifest, RunDir, ScenarioEntry, WithheldRequest


@dataclass(frozen=True)
class Evidence:
    """One scenario of a finished run: its matrix row, its manifest entry, the run folder, and the
    Kafka version it ran on (its client version is the entry's)."""

    row: Mapping[str, Any]
    entry: ScenarioEntry
    run: RunDir
    kafka_version: str


Check = Callable[[Evidence], tuple[bool, str]]  # reproduced?, what acklab measured


@dataclass(frozen=True)
class Observation:
    """What a source says happens in one scenario, and how acklab checks it: on the scenario of each
    client of the run, or only on those of `family` (a client family, where the clients differ).
    `restates`: the id of the registry claim (`acklab.model.claims`) it restates, if any (its check
    is then that claim's bounds: `restating`)."""

    claim: str  # what the source says happens
    scenario: str  # `<profile>__<fault>` of the preset's run (a run's other clients tag the profile)
    check: Check
    restates: str | None = None
    columns: tuple[str, ...] = ()  # the restated claim's columns it checks (all if empty)
    family: str | None = None

    def on(self, family: str) -> Observation:
        """This observation, checked on `family`'s scenarios only."""
        return replace(self, family=family)


def on_java(*observations: Observation) -> tuple[Observation, ...]:
    return tuple(o.on("java") for o in observations)


def on_librdkafka(*observations: Observation) -> tuple[Observation, ...]:
    return tuple(o.on("librdkafka") for o in observations)


def restating(text: str, scenario: str, claim_id: str, *columns: str) -> Observation:
    """An observation that restates the registry claim `claim_id`: checked by that claim's bounds on
    `columns` (all of its bounds if none are named). The registry is read when the check runs (the
    DAG files read the presets when they are parsed); `restated_bounds` checks every restatement."""

    def check(e: Evidence) -> tuple[bool, str]:
        bounds = restated_bounds(claim_id, columns)
        values = {b.column: e.row.get(b.column) for b in bounds}
        measured = ", ".join(f"{column} = {int(value or 0):,}" for column, value in values.items())
        return all(b.holds(values[b.column]) for b in bounds), f"{measured} of {int(e.row.get('planned') or 0):,} planned"

    return Observation(text, scenario, check, claim_id, columns)


def restated_bounds(claim_id: str, columns: tuple[str, ...]) -> list[Expectation]:
    """The bounds of the registry claim `claim_id` on `columns` (all if empty); ValueError if it has
    none of them or lacks one."""
    from acklab.model.claims import claim

    bounds = [e for e in claim(claim_id).expectations() if not columns or e.column in columns]
    if not bounds or {e.column for e in bounds} < set(columns):
        raise ValueError(f"claim {claim_id} does not bound all of {columns}")
    return bounds


@dataclass(frozen=True)
class Preset:
    name: str
    source: str  # e.g. "field-notes #2"
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)  # RunParams fields
    observations: tuple[Observation, ...] = ()
    tracker: str = ""  # a bug preset's tracker entry (URL)

    def summary(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "description": self.description, **({"tracker": self.tracker} if self.tracker else {})}


# --- checks ------------------------------------------------------------------------------------


def count(column: str, test: str, value: int) -> Check:
    """The matrix column compared with `value` (`test` one of ==, >, >=)."""
    compare = {"==": int.__eq__, ">": int.__gt__, ">=": int.__ge__}[test]

    def check(e: Evidence) -> tuple[bool, str]:
        observed = int(e.row.get(column) or 0)
        return compare(observed, value), f"{column} = {observed:,} of {int(e.row.get('planned') or 0):,} planned"

    return check


def errors(*names: str) -> Check:
    """Some delivery failed with one of the librdkafka errors `names` (on the Java client: the exception
    it raises for them, `acklab.workload.java_errors`); every error is listed."""

    def check(e: Evidence) -> tuple[bool, str]:
        seen = e.entry.delivery_errors
        wanted = java_names(names) if e.entry.client_family == "java" else set(names)
        listed = ", ".join(f"{name} x{n:,}" for name, n in sorted(seen.items(), key=lambda kv: -kv[1])) or "no delivery error"
        return any(seen.get(name) for name in wanted), f"delivery errors: {listed}"

    return check


def client_stat(counter: str, test: str, value: int) -> Check:
    """A librdkafka statistics counter (totals over the producers, `acklab.workload.stats`)."""
    compare = {"==": int.__eq__, ">": int.__gt__}[test]

    def check(e: Evidence) -> tuple[bool, str]:
        observed = int(e.entry.producer_stats.get(counter) or 0)
        return compare(observed, value), f"client statistics {counter} = {observed:,}"

    return check


def failed_after(low_s: float, high_s: float) -> Check:
    """The median time from produce() to the failure report of failed messages is in [low, high]."""

    def check(e: Evidence) -> tuple[bool, str]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if e.entry.send_log is None:
            return False, "no send log"
        log = pq.read_table(e.run.root / e.entry.send_log, columns=["state", "send_ts", "ack_ts"])
        failed = log.filter(pc.equal(log["state"], "failed"))
        waits = [a - s for s, a in zip(failed["send_ts"].to_pylist(), failed["ack_ts"].to_pylist(), strict=True) if a and s]
        if not waits:
            return False, "no message failed"
        middle = median(waits)
        return low_s <= middle <= high_s, f"{len(waits):,} failed a median {middle:.1f} s after they were sent"

    return check


def send_paused(at_least_s: float) -> Check:
    """Some producer's sends stopped for at least `at_least_s` (the longest gap between two consecutive
    records it sent): a send() call that blocked, e.g. Java's wait of up to max.block.ms for metadata."""

    def check(e: Evidence) -> tuple[bool, str]:
        import pyarrow.parquet as pq

        if e.entry.send_log is None:
            return False, "no send log"
        log = pq.read_table(e.run.root / e.entry.send_log, columns=["producer", "send_ts"]).to_pandas().dropna()
        gaps = log.sort_values("send_ts").groupby("producer")["send_ts"].diff()
        longest = float(gaps.max()) if gaps.notna().any() else 0.0
        return longest >= at_least_s, f"the longest pause between two sends was {longest:.1f} s"

    return check


def broker_log_lines(text: str, at_least: int) -> Check:
    """Lines of the brokers' logs (`layout.SERVER_LOG` of each node in the run's cluster folder) containing `text`."""

    def check(e: Evidence) -> tuple[bool, str]:
        found = sum(
            text in line for log in e.run.cluster.rglob(SERVER_LOG) for line in log.read_text(errors="replace").splitlines()
        )
        return found >= at_least, f"{found:,} broker log lines with {text}"

    return check


def producer_log_lines(text: str, at_least: int = 1) -> Check:
    """Lines of the scenario's producer logs containing `text` (the Java driver logs each error's first
    message there, as users quote it)."""

    def check(e: Evidence) -> tuple[bool, str]:
        folder = e.run.scenario(e.entry.scenario).producers
        lines = [line for log in sorted(folder.glob("*.log")) for line in log.read_text(errors="replace").splitlines() if text in line]
        quoted = f": {lines[0].strip()[:200]}" if lines else ""
        return len(lines) >= at_least, f"{len(lines):,} producer log lines with {text!r}{quoted}"

    return check


def attempts_per_failure(at_least: int) -> Check:
    """Transmissions per failed record, (txmsgs - acked) / failed from the client statistics: a
    record that failed after 1 + retries attempts was sent that many times."""

    def check(e: Evidence) -> tuple[bool, str]:
        sent, acked, failed = (int(v or 0) for v in (e.entry.producer_stats.get("txmsgs"), e.row.get("acked"), e.row.get("failed")))
        if not failed:
            return False, "no record failed"
        ratio = (sent - acked) / failed
        return ratio >= at_least, f"{sent:,} transmissions for {acked:,} acked and {failed:,} failed records: {ratio:.1f} per failed record"

    return check


def replayed(appended: bool) -> Check:
    """A withheld request was replayed to the broker, which `appended` it (answered NONE for some
    partition) or refused it (an error for every partition), as the fault's withheld log records it."""

    def check(e: Evidence) -> tuple[bool, str]:
        held = [request for record in e.entry.fault_timeline for request in record.withheld if not request.queued]
        answered = [answer for request in held for answer in _answers(request).values()]
        if not answered:
            return False, "no withheld request was replayed and answered" if held else "no request was withheld"
        ok = ("NONE" in answered) if appended else all(answer != "NONE" for answer in answered)
        return ok, "withheld and replayed: " + "; ".join(map(_described, held))

    return check


def _answers(request: WithheldRequest) -> dict[str, str]:
    """partition -> the broker's answer to a replayed produce request (`<topic>-<p>: NAME, ...`)."""
    pairs = (part.rsplit(": ", 1) for part in (request.answer or "").split(", ") if ": " in part)
    return {where.rsplit("-", 1)[-1]: answer for where, answer in pairs}


def _described(request: WithheldRequest) -> str:
    batches = ", ".join(f"partition {b.partition} producer id {b.producer_id} epoch {b.producer_epoch} sequence {b.base_sequence}" for b in request.batches)
    if request.released_at is None:
        fate = "never replayed"
    else:
        fate = "answered " + (", ".join(f"{p}: {a}" for p, a in _answers(request).items()) or request.answer or "nothing")
    return f"{request.api} ({batches or 'no idempotent batch'}) {fate}"


def fatal(name: str) -> Check:
    """The producer raised a fatal error named `name`."""

    def check(e: Evidence) -> tuple[bool, str]:
        error = e.entry.fatal_error
        return bool(error and name in error), f"fatal error: {error}" if error else "no fatal error"

    return check


def faults_cover_load() -> Check:
    """Every fault of the schedule took effect before the load started and ended after it ended:
    the load ran entirely under it."""

    def check(e: Evidence) -> tuple[bool, str]:
        events, start, end = e.entry.fault_timeline, e.entry.load_started, e.entry.load_ended
        if not events or start is None or end is None:
            return False, "no fault timeline or load times"
        covered = e.entry.fault_effective and all(
            ev.effective_at is not None and ev.effective_at <= start and ev.ended is not None and ev.ended >= end for ev in events
        )
        spans = "; ".join(
            f"{ev.fault} in effect {_rel(ev.effective_at, start)} to {_rel(ev.ended, start)} (load: 0.0 s to {end - start:.1f} s): {ev.effect}"
            for ev in events
        )
        return covered, spans

    return check


def fixed_in(component: Literal["kafka", "client"], version: str, before: Check, after: Check) -> Check:
    """`before` on a `component` (Kafka broker, or confluent-kafka client) older than `version`,
    `after` on `version` and later: a documented bug and its fix."""

    def check(e: Evidence) -> tuple[bool, str]:
        from packaging.version import Version  # presets are read at DAG parse time: only when judging

        ran = e.kafka_version if component == "kafka" else e.entry.client_version
        if not ran:
            return False, f"{component} version not recorded"
        ok, measured = (before if Version(ran) < Version(version) else after)(e)
        return ok, f"{component} {ran}: {measured}"

    return check


def _rel(ts: float | None, start: float) -> str:
    return "never" if ts is None else f"{ts - start:+.1f} s"


def both(*checks: Check) -> Check:
    def check(e: Evidence) -> tuple[bool, str]:
        results = [c(e) for c in checks]
        return all(ok for ok, _ in results), "; ".join(text for _, text in results)

    return check


# --- the presets ---------------------------------------------------------------------------------


def _raw(**properties: Any) -> dict[str, Any]:
    return {"librdkafka": _properties(properties)}


def _both(librdkafka: Mapping[str, Any], java: Mapping[str, Any]) -> dict[str, Any]:
    """One producer written for each client: librdkafka's properties and the Java client's
    (`_properties` names, e.g. request_timeout_ms)."""
    return {"librdkafka": _properties(librdkafka), "java": _properties(java)}


def _properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {key.replace("_", "."): value for key, value in properties.items()}


# The field notes' write-ups ran the Java client: their presets run it first, librdkafka beside it.
WRITE_UPS_CLIENTS = ["java", "librdkafka"]

FN1_TIMEOUT_MS = 5000
FN1_BLOCK_MS = 2000  # Java's max.block.ms (default 60000): each send() waits this long for metadata
FN1_MESSAGES = 6
FN1_DOWN_S = 25.0  # outlasts the load: Java's sends block FN1_MESSAGES x max.block.ms, librdkafka's expire after message.timeout.ms
FN1_SCENARIO = "fn1-acks1__leader-restart-before-load"
FN2_TIMEOUT_MS = 5000
FN2_JAVA_REQUEST_MS = 1000  # Java: delivery.timeout.ms = request.timeout.ms + linger.ms (0), the write-up's 1018 ms
FN3_RETRIES = 5
FN7_TIMEOUT_MS = 5000
FN7_SCENARIO = "fn7-acks1__leader-kill"
FN8M_DELAY_S = 10.0  # the write-up's 30 s scaled down: a timeout above it, max.block.ms below two round trips of it
FN8M_TIMEOUT_MS = 15000
FN8M_SCENARIO = "{}__latency-before-load"


def _two_brokers(rf: int, shows: str, observation: Observation) -> Preset:
    """Field note #7 on topics of replication factor `rf`: broker 2 (not the controller), the leader of partition 1
    (`run_group` assigns partition p of the first group to broker p + 1), killed for 10 s."""
    return Preset(
        f"field-notes-7-two-brokers-rf{rf}",
        "field-notes #7",
        f"2 brokers (broker 1 the KRaft controller), topics of RF={rf}, acks=1, delivery timeout {FN7_TIMEOUT_MS} ms "
        f"(librdkafka message.timeout.ms, Java delivery.timeout.ms); broker 2 killed for 10 s: {shows}",
        {
            "topology": f"two-brokers-rf{rf}", "profiles": ["fn7-acks1"], "clients": WRITE_UPS_CLIENTS,
            "custom_profiles": {"fn7-acks1": _both(
                {"acks": "1", "request_timeout_ms": 1000, "message_timeout_ms": FN7_TIMEOUT_MS},
                {"acks": "1", "request_timeout_ms": 1000, "delivery_timeout_ms": FN7_TIMEOUT_MS},
            )},
            "schedule": [{"at_s": 2.0, "fault": "leader-kill", "target": "leader:1", "duration_s": 10.0}],
            "messages": 8000, "rate": 400.0,
        },
        (observation,),
    )


def _by_name(*presets: Preset) -> dict[str, Preset]:
    return {preset.name: preset for preset in presets}


PRESETS: dict[str, Preset] = _by_name(
        Preset(
            "field-notes-1-broker-down-before-first-send",
            "field-notes #1",
            "1 broker, acks=1, request.timeout.ms=1000, retries=10; the topic exists, then the broker is stopped (SIGTERM) "
            f"before the producer starts and stays down {FN1_DOWN_S:g} s: no metadata ever arrives, so nothing is sent and nothing retried. "
            f"Java's send() waits max.block.ms ({FN1_BLOCK_MS} ms here, 60000 by default) for metadata and fails the record with "
            f"TimeoutException; librdkafka's produce() does not block, each record expires after message.timeout.ms ({FN1_TIMEOUT_MS} ms)",
            {
                "topology": "single-broker",
                "profiles": ["fn1-acks1"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {"fn1-acks1": _both(
                    {"acks": "1", "request_timeout_ms": 1000, "retries": 10, "message_timeout_ms": FN1_TIMEOUT_MS},
                    {"acks": "1", "request_timeout_ms": 1000, "retries": 10, "max_block_ms": FN1_BLOCK_MS},
                )},
                "schedule": [{"fault": "leader-restart", "before_load": True, "duration_s": FN1_DOWN_S}],
                "messages": FN1_MESSAGES, "rate": 2.0,
            },
            (
                Observation("the broker is down from before the first send to the end of the load", FN1_SCENARIO, faults_cover_load()),
                Observation("every record fails with a timeout error", FN1_SCENARIO, both(count("failed", "==", FN1_MESSAGES), errors("_MSG_TIMED_OUT"))),
                *on_java(
                    Observation(
                        f"send() waits max.block.ms for metadata: TimeoutException: Topic ... not present in metadata after {FN1_BLOCK_MS} ms",
                        FN1_SCENARIO, producer_log_lines(f"not present in metadata after {FN1_BLOCK_MS} ms"),
                    ),
                    Observation(
                        f"each record fails max.block.ms ({FN1_BLOCK_MS} ms) after its send(), not after any retry", FN1_SCENARIO,
                        failed_after(0.8 * FN1_BLOCK_MS / 1000, 2.0 * FN1_BLOCK_MS / 1000),
                    ),
                ),
                *on_librdkafka(
                    Observation(
                        f"produce() does not block: each record fails after the delivery timeout ({FN1_TIMEOUT_MS} ms), not after any retry",
                        FN1_SCENARIO, failed_after(0.8 * FN1_TIMEOUT_MS / 1000, 2.0 * FN1_TIMEOUT_MS / 1000),
                    ),
                ),
                Observation(
                    "no retries happen because nothing was ever sent", FN1_SCENARIO,
                    both(client_stat("txmsgs", "==", 0), client_stat("txretries", "==", 0)),
                ),
                Observation(
                    "nothing is stored and nothing acknowledged is lost", FN1_SCENARIO,
                    both(count("records_read", "==", 0), count("acked", "==", 0), count("lost", "==", 0)),
                ),
            ),
        ),
        Preset(
            "field-notes-2-broker-down-after-metadata",
            "field-notes #2",
            "1 broker, acks=1, retries=10; the producer has metadata, then the broker is killed for 20 s: queued records "
            f"expire, never counted lost: on Java after delivery.timeout.ms = request.timeout.ms + linger.ms ({FN2_JAVA_REQUEST_MS} + 0 ms, "
            f"the write-up's 'ms has passed since batch creation plus linger time'), on librdkafka after message.timeout.ms ({FN2_TIMEOUT_MS} ms)",
            {
                "topology": "single-broker",
                "profiles": ["fn2-acks1"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {"fn2-acks1": _both(
                    {"acks": "1", "request_timeout_ms": 1000, "retries": 10, "message_timeout_ms": FN2_TIMEOUT_MS},
                    {"acks": "1", "request_timeout_ms": FN2_JAVA_REQUEST_MS, "retries": 10, "linger_ms": 0, "delivery_timeout_ms": FN2_JAVA_REQUEST_MS},
                )},
                "faults": ["leader-kill"], "fault_at_s": 2.0, "fault_duration_s": 20.0, "messages": 2000, "rate": 200.0,
            },
            (
                Observation("queued records expire with a timeout error", "fn2-acks1__leader-kill", errors("_MSG_TIMED_OUT", "_TIMED_OUT")),
                *on_java(
                    Observation(
                        "TimeoutException: Expiring N record(s) for <topic>-0: ... ms has passed since batch creation",
                        "fn2-acks1__leader-kill", producer_log_lines("has passed since batch creation"),
                    ),
                    Observation(
                        f"they expire after about request.timeout.ms + linger.ms ({FN2_JAVA_REQUEST_MS} ms)", "fn2-acks1__leader-kill",
                        failed_after(0.8 * FN2_JAVA_REQUEST_MS / 1000, 3.0 * FN2_JAVA_REQUEST_MS / 1000),
                    ),
                    Observation(
                        "then send() blocks (up to max.block.ms) until the broker is back: records made during the outage wait instead of expiring",
                        "fn2-acks1__leader-kill", send_paused(10.0),
                    ),
                ),
                *on_librdkafka(
                    Observation(
                        f"they expire after about the delivery timeout ({FN2_TIMEOUT_MS} ms)", "fn2-acks1__leader-kill",
                        failed_after(0.8 * FN2_TIMEOUT_MS / 1000, 2.0 * FN2_TIMEOUT_MS / 1000),
                    ),
                ),
                Observation("an expired record is a failure the client knows of, not a loss", "fn2-acks1__leader-kill", count("lost", "==", 0)),
            ),
        ),
        Preset(
            "field-notes-3-not-enough-replicas",
            "field-notes #3",
            f"3 brokers, RF=3, min.insync.replicas=2, acks=all, retries={FN3_RETRIES}; two followers stopped for 10 s: "
            "the broker rejects each attempt with NOT_ENOUGH_REPLICAS, the producer reports one final error per record "
            "(Java: one callback with NotEnoughReplicasException)",
            {
                "topology": "three-brokers",
                "profiles": ["fn3-acks-all"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {"fn3-acks-all": _both(
                    {"acks": "all", "retries": FN3_RETRIES, "request_timeout_ms": 1000},
                    {"acks": "all", "retries": FN3_RETRIES, "request_timeout_ms": 1000},
                )},
                "faults": ["replicas-down"], "messages": 4000, "rate": 200.0,
            },
            (
                Observation("records fail with NOT_ENOUGH_REPLICAS", "fn3-acks-all__replicas-down", errors("NOT_ENOUGH_REPLICAS")),
                Observation(
                    "the broker logs NotEnoughReplicasException rejections", "fn3-acks-all__replicas-down",
                    broker_log_lines("NotEnoughReplicasException", 1 + FN3_RETRIES),
                ),
                Observation(
                    f"each failed record was tried 1 + retries = {1 + FN3_RETRIES} times, then reported once",
                    "fn3-acks-all__replicas-down", attempts_per_failure(1 + FN3_RETRIES),
                ),
                restating("no acknowledged record is lost", "fn3-acks-all__replicas-down", "guarantee_at-least-once", "lost"),
            ),
        ),
        Preset(
            "field-notes-4-acks0-vs-acks1-leader-kill",
            "field-notes #4",
            "3 brokers, RF=3, min.insync.replicas=2; 100,000 records with acks=0 and with acks=1, the leader SIGKILLed "
            "mid-stream; every record matched by id (the write-up compared log-end offsets and saw no loss)",
            {
                "topology": "three-brokers", "profiles": ["at-most-once", "leader-ack"], "clients": WRITE_UPS_CLIENTS,
                "faults": ["leader-kill"], "messages": 100_000, "rate": 10_000.0,
            },
            (
                Observation("acks=0: no loss (log-end offsets unchanged)", "at-most-once__leader-kill", count("lost", "==", 0)),
                Observation("acks=1: no loss (log-end offsets unchanged)", "leader-ack__leader-kill", count("lost", "==", 0)),
                Observation("acks=1: no duplicates", "leader-ack__leader-kill", count("duplicates", "==", 0)),
            ),
        ),
        Preset(
            "field-notes-5-lost-acks",
            "field-notes #5",
            "3 brokers; produce responses dropped after the broker appended: at-least-once stores duplicates, "
            "the idempotent producer does not",
            {
                "topology": "three-brokers", "profiles": ["at-least-once", "idempotent"], "clients": WRITE_UPS_CLIENTS,
                "faults": ["ack-loss"], "messages": 40_000, "rate": 2000.0,
            },
            (
                Observation("at-least-once retries store duplicates", "at-least-once__ack-loss", count("duplicates", ">", 0)),
                restating("the idempotent producer stores each record once", "idempotent__ack-loss", "guarantee_exactly-once", "duplicates"),
            ),
        ),
        Preset(
            "field-notes-6-keyed-retries",
            "field-notes #6",
            "3 brokers, leader SIGKILLed; keyed records under librdkafka's consistent_random (CRC32) and "
            "murmur2_random (Java's murmur2), and under the Java client's own murmur2: retried records land in their key's partition",
            {
                "topology": "three-brokers",
                "profiles": ["at-least-once", "fn6-murmur2"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {"fn6-murmur2": _raw(acks="all", partitioner="murmur2_random")},
                "faults": ["leader-kill"], "messages": 40_000, "rate": 2000.0,
            },
            (
                *on_librdkafka(
                    restating("consistent_random: every record in its key's partition", "at-least-once__leader-kill", "retries-keep-partition"),
                    restating("murmur2_random: every record in its key's partition", "fn6-murmur2__leader-kill", "retries-keep-partition"),
                ),
                *on_java(
                    restating("Java's murmur2: every record in its key's partition", "at-least-once__leader-kill", "retries-keep-partition"),
                ),
            ),
        ),
        _two_brokers(1, "writes to its partition fail, there is no failover",
                     Observation("writes to the dead broker's partition fail", FN7_SCENARIO, both(count("failed", ">", 0), errors("_MSG_TIMED_OUT")))),
        _two_brokers(2, "leadership moves to broker 1 and writes continue",
                     Observation("leadership moves and every write succeeds", FN7_SCENARIO, count("failed", "==", 0))),
        Preset(
            "field-notes-8-latency-30s",
            "field-notes #8",
            "3 brokers; every response of the leader delayed 30 s for 10 s (in user space, the proxy: netem is "
            "missing here); request.timeout.ms=1500 (the write-up's setting: client-side in Java, broker-side only in "
            "librdkafka), librdkafka's client-side socket.timeout.ms=1500, and both at 40000",
            {
                "topology": "three-brokers",
                "profiles": ["fn8-request-1500", "fn8-socket-1500", "fn8-40000"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {
                    "fn8-request-1500": _both({"acks": "all", "request_timeout_ms": 1500}, {"acks": "all", "request_timeout_ms": 1500}),
                    "fn8-socket-1500": _raw(acks="all", request_timeout_ms=1500, socket_timeout_ms=1500),
                    "fn8-40000": _both(
                        {"acks": "all", "request_timeout_ms": 40000, "socket_timeout_ms": 40000}, {"acks": "all", "request_timeout_ms": 40000}
                    ),
                },
                "faults": ["latency"], "messages": 8000, "rate": 400.0,
            },
            (
                *on_java(
                    Observation(
                        "request.timeout.ms=1500: Disconnecting from node N due to request timeout (client-side timeouts and disconnects)",
                        "fn8-request-1500__latency", both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0)),
                    ),
                ),
                *on_librdkafka(
                    Observation(
                        "request.timeout.ms=1500: requests time out and the client reconnects", "fn8-request-1500__latency",
                        both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0)),
                    ),
                    Observation(
                        "the same with librdkafka's client-side timeout, socket.timeout.ms=1500", "fn8-socket-1500__latency",
                        both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0)),
                    ),
                ),
                Observation("timeouts of 40000 ms outlast a 30 s delay: no request times out", "fn8-40000__latency", client_stat("req_timeouts", "==", 0)),
            ),
        ),
        Preset(
            "field-notes-8-metadata-wait",
            "field-notes #8",
            f"1 broker whose every response (ApiVersions and Metadata too) is delayed {FN8M_DELAY_S:g} s from before the producer "
            f"starts, for 20 s (the write-up's 30 s delay and 60 s max.block.ms scaled down); request.timeout.ms=1500, and raised to "
            f"{FN8M_TIMEOUT_MS} ms, above the delay: raising it is not enough on Java, whose first send() needs metadata, two delayed round "
            f"trips (ApiVersions, then Metadata) that outlast max.block.ms ({FN8M_TIMEOUT_MS} ms): Topic ... not present in metadata. "
            "librdkafka's produce() does not wait for metadata: its records queue until it arrives",
            {
                "topology": "single-broker",
                "profiles": ["fn8m-1500", "fn8m-raised"], "clients": WRITE_UPS_CLIENTS,
                "custom_profiles": {
                    "fn8m-1500": _both(
                        {"acks": "all", "request_timeout_ms": 1500, "socket_timeout_ms": 1500},
                        {"acks": "all", "request_timeout_ms": 1500, "max_block_ms": FN8M_TIMEOUT_MS},
                    ),
                    "fn8m-raised": _both(
                        {"acks": "all", "request_timeout_ms": FN8M_TIMEOUT_MS, "socket_timeout_ms": FN8M_TIMEOUT_MS},
                        {"acks": "all", "request_timeout_ms": FN8M_TIMEOUT_MS, "max_block_ms": FN8M_TIMEOUT_MS},
                    ),
                },
                "schedule": [{"fault": "latency", "before_load": True, "duration_s": 20.0, "options": {"delay_s": FN8M_DELAY_S}}],
                "messages": 4, "rate": 1.0,
            },
            (
                *on_java(
                    Observation(
                        "request.timeout.ms=1500: the client times requests out and disconnects", FN8M_SCENARIO.format("fn8m-1500"),
                        both(client_stat("req_timeouts", ">", 0), client_stat("disconnects", ">", 0)),
                    ),
                    Observation(
                        "raised above the delay, no request times out", FN8M_SCENARIO.format("fn8m-raised"), client_stat("req_timeouts", "==", 0),
                    ),
                    Observation(
                        f"yet the first send() meets max.block.ms: Topic ... not present in metadata after {FN8M_TIMEOUT_MS} ms",
                        FN8M_SCENARIO.format("fn8m-raised"),
                        both(count("failed", ">", 0), errors("_UNKNOWN_TOPIC"), producer_log_lines(f"not present in metadata after {FN8M_TIMEOUT_MS} ms")),
                    ),
                ),
                *on_librdkafka(
                    Observation(
                        "produce() never waits for metadata: the records queue and are delivered once it arrives",
                        FN8M_SCENARIO.format("fn8m-raised"), both(count("failed", "==", 0), count("acked", "==", 4)),
                    ),
                ),
            ),
        ),
)


def affected(component: Literal["kafka", "client"], versions: tuple[str, ...], present: Check, absent: Check) -> Check:
    """`present` on the `component` versions a bug is documented in, `absent` on every other."""

    def check(e: Evidence) -> tuple[bool, str]:
        ran = e.kafka_version if component == "kafka" else e.entry.client_version
        if not ran:
            return False, f"{component} version not recorded"
        ok, measured = (present if ran in versions else absent)(e)
        return ok, f"{component} {ran}: {measured}"

    return check


BUG_4438 = "idem-single__lose-then-reject"
BUG_13598 = "java-defaults__ack-loss"
BUG_13598_AFFECTED = ("3.0.0", "3.1.0")
BUG_4736 = "idem-large__error-inject"
BUG_4736_AFFECTED = ("2.2.0", "2.3.0", "2.4.0")
BUG_14402 = "txn-rto3s__withhold-replay"
BUG_14417 = "java-defaults__error-inject-before-load"
BUG_14417_AFFECTED = ("3.3.0", "3.3.1")
KAFKA_14402: dict[str, Any] = {
    "topology": "three-brokers",
    "client": "java",
    "profiles": ["txn-rto3s"],
    "custom_profiles": {
        "txn-rto3s": {
            "java": _properties({
                "transactional_id": "app", "request_timeout_ms": 3000, "delivery_timeout_ms": 3000, "linger_ms": 0, "transaction_timeout_ms": 10000,
            }),
            "description": "transactional; a batch timed out by its request is failed, not retried",
        }
    },
    # 4 transactions of 1,000 records at 1,000 msg/s: the withheld write (3.2 s in) belongs to the last, so no later
    # transaction of the producer writes that partition (whose marker would end the stale transaction instead). It is
    # replayed 1 s after the abort's EndTxn was answered: the coordinator answers once the abort is in its log and writes
    # the partitions' markers after that, so a replay at once may land before the marker and be aborted with it.
    "schedule": [
        {"at_s": 3.2, "fault": "withhold-replay", "target": "leader:0", "duration_s": 10.0,
         "options": {"transactional_only": True, "replay_after": "EndTxn", "delay_s": 1.0}},
    ],
    "messages": 4_000, "rate": 1000.0,
}
BUGS: dict[str, Preset] = _by_name(
        Preset(
            "librdkafka-4438",
            "librdkafka #3584, fixed by PR #4438 in 2.3.0",
            "idempotent producer, one record per request (batch.num.messages=1, linger.ms=0, up to 5 in flight); the "
            "leader's proxy loses one produce request and those pipelined behind it with their connection (possibly "
            "persisted, yet never appended), then answers the lost batch's retry NOT_ENOUGH_REPLICAS while the requests "
            "behind it reach the broker and get OUT_OF_ORDER_SEQUENCE_NUMBER: clients before 2.3.0 had advanced their "
            "next expected sequence past the lost batches and die of a fatal sequence desynchronization",
            {
                "topology": "three-brokers",
                "profiles": ["idem-single"],
                "custom_profiles": {"idem-single": _raw(enable_idempotence=True, batch_num_messages=1, linger_ms=0, message_timeout_ms=60000)},
                "schedule": [
                    {"at_s": 2.0, "fault": "lose-then-reject", "target": "leader:0", "duration_s": 5.0, "options": {"error": "NOT_ENOUGH_REPLICAS"}},
                ],
                "messages": 6_000, "rate": 500.0,
            },
            (
                Observation(
                    "before 2.3.0 the producer dies of a fatal OUT_OF_ORDER_SEQUENCE_NUMBER (sequence desynchronization); "
                    "from 2.3.0 on it delivers every record", BUG_4438,
                    fixed_in("client", "2.3.0", fatal("OUT_OF_ORDER_SEQUENCE_NUMBER"), both(count("fatal", "==", 0), count("failed", "==", 0))),
                ),
            ),
            tracker="https://github.com/confluentinc/librdkafka/issues/3584",
        ),
        Preset(
            "librdkafka-4736",
            "librdkafka #4736 (since 2.2.0, fixed in 2.5.0 by PR #4750)",
            "idempotent producer with large batches (linger.ms=500, up to 10,000 records a batch, 50,000 msg/s) whose writes to the leader of "
            "partition 0 are answered NOT_ENOUGH_REPLICAS for 3 s: the retried batches' records each got their own jittered "
            "backoff, so a retried batch could not be rebuilt with the same records and clients 2.2.0 to 2.4.0 die of the fatal "
            "'Unable to reconstruct MessageSet' (Local: Inconsistent state); from 2.5.0 a batch's records share one backoff",
            {
                "topology": "three-brokers",
                "profiles": ["idem-large"],
                "custom_profiles": {"idem-large": _raw(enable_idempotence=True, linger_ms=500, batch_num_messages=10000, batch_size=10_000_000)},
                "schedule": [
                    {"at_s": 2.0, "fault": "error-inject", "target": "leader:0", "duration_s": 3.0, "options": {"error": "NOT_ENOUGH_REPLICAS"}},
                ],
                "messages": 200_000, "rate": 50_000.0,
            },
            (
                Observation(
                    "from 2.2.0 to 2.4.0 the producer dies of the fatal 'Unable to reconstruct MessageSet'; from 2.5.0 on it "
                    "delivers every record", BUG_4736,
                    affected(
                        "client", BUG_4736_AFFECTED, fatal("Unable to reconstruct MessageSet"),
                        both(count("fatal", "==", 0), count("failed", "==", 0), client_stat("txretries", ">", 0)),
                    ),
                ),
            ),
            tracker="https://github.com/confluentinc/librdkafka/issues/4736",
        ),
        Preset(
            "kafka-14402",
            "KAFKA-14402 (KIP-890 part 1: transaction verification, Kafka 3.6)",
            "the Java transactional producer, request.timeout.ms=delivery.timeout.ms=3000 (a batch timed out by its request "
            "is failed, not retried); in the load's last transaction the leader's proxy withholds one produce request, the "
            "client times it out and aborts, and the proxy replays the withheld write 1 s after the abort's EndTxn was "
            "answered: on Kafka before 3.6 the stale write opens a transaction no coordinator knows (a hanging transaction, "
            "the last stable offset stuck), from 3.6 on the broker verifies the partition with the coordinator and refuses it",
            KAFKA_14402,
            (
                Observation(
                    "before Kafka 3.6 the stale write leaves a hanging transaction; from 3.6 on the broker refuses it and no "
                    "partition is left with one", BUG_14402,
                    fixed_in(
                        "kafka", "3.6.0", both(count("hanging_partitions", ">", 0), replayed(appended=True)),
                        both(count("hanging_partitions", "==", 0), replayed(appended=False)),
                    ),
                ),
            ),
            tracker="https://issues.apache.org/jira/browse/KAFKA-14402",
        ),
        Preset(
            "kafka-14402-verification-off",
            "KAFKA-14402 control: Kafka 3.6+ with transaction.partition.verification.enable=false",
            "the kafka-14402 experiment on brokers whose transaction verification is turned off: the replayed stale write is "
            "appended again and the hanging transaction comes back, which shows that verification is what fixes it",
            {**KAFKA_14402, "broker_config": {"transaction.partition.verification.enable": "false"}},
            (
                Observation(
                    "with verification off the stale write is appended and leaves a hanging transaction", BUG_14402,
                    both(count("hanging_partitions", ">", 0), replayed(appended=True)),
                ),
            ),
            tracker="https://issues.apache.org/jira/browse/KAFKA-14402",
        ),
        Preset(
            "kafka-14417",
            "KAFKA-14417 (kafka-clients 3.3.0 and 3.3.1; fixed in 3.3.2 and 3.4.0)",
            "the Java producer with its default configuration (idempotent since 3.0) whose first InitProducerId request to each "
            "broker is answered REQUEST_TIMED_OUT, a retriable error brokers from 3.3 return when the controller is slow to hand "
            "out producer ids (KIP-730): kafka-clients 3.3.0 and 3.3.1 treat it as fatal (\"Unexpected error in "
            "InitProducerIdResponse\") and fail every record; the fixed versions retry it and deliver everything",
            {
                "topology": "three-brokers",
                "client": "java",
                "profiles": ["java-defaults"],
                "custom_profiles": {"java-defaults": {"java": {}, "description": "an empty producer.properties: every default"}},
                "schedule": [
                    {"fault": "error-inject", "target": "every-broker", "before_load": True, "duration_s": 10.0,
                     "options": {"apis": ["InitProducerId"], "error": "REQUEST_TIMED_OUT", "count": 1}},
                ],
                "messages": 2_000, "rate": 500.0,
            },
            (
                Observation(
                    "on 3.3.0 and 3.3.1 the producer dies of the retriable error and fails every record; the fixed versions "
                    "deliver every record", BUG_14417,
                    affected(
                        "client", BUG_14417_AFFECTED,
                        both(count("acked", "==", 0), producer_log_lines("Unexpected error in InitProducerIdResponse")),
                        both(count("failed", "==", 0), count("acked", ">", 0)),
                    ),
                ),
            ),
            tracker="https://issues.apache.org/jira/browse/KAFKA-14417",
        ),
        Preset(
            "kafka-13598",
            "KAFKA-13598 (kafka-clients 3.0.0 and 3.1.0; fixed in 3.0.1, 3.1.1 and 3.2.0)",
            "the Java producer with its default configuration (no property set: documented since 3.0 as acks=all with "
            "enable.idempotence=true) while the leader's proxy drops produce responses after the broker appended: "
            "in kafka-clients 3.0.0 and 3.1.0 the default idempotence did not take effect unless set explicitly, so "
            "the retries of the lost acknowledgements are appended twice; the model expects what the documentation "
            "promises, so those rows are red",
            {
                "topology": "three-brokers",
                "client": "java",
                "profiles": ["java-defaults"],
                "custom_profiles": {"java-defaults": {"java": {}, "description": "an empty producer.properties: every default"}},
                "faults": ["ack-loss"],
                "messages": 20_000, "rate": 2000.0,
            },
            (
                Observation(
                    "on 3.0.0 and 3.1.0 the default producer duplicates the records whose acknowledgement was lost; "
                    "on the fixed versions it is idempotent and writes each record once", BUG_13598,
                    affected("client", BUG_13598_AFFECTED, count("duplicates", ">", 0), count("duplicates", "==", 0)),
                ),
            ),
            tracker="https://issues.apache.org/jira/browse/KAFKA-13598",
        ),
)
"""Documented client and broker bugs, each rediscovered (or not) per version: run them across versions
(`acklab run --preset NAME --client FAMILY:VERSION ... --kafka-version ...`, or the version-regression DAG)."""
PRESETS.update(BUGS)
FIELD_NOTES = tuple(name for name, p in PRESETS.items() if p.source.startswith("field-notes"))


def preset(name: str) -> Preset:
    """The preset called `name`; SpecError listing the presets otherwise."""
    if name not in PRESETS:
        raise SpecError(f"unknown preset {name!r}; valid: {', '.join(sorted(PRESETS)) or '(none)'}")
    return PRESETS[name]


VERSIONED = ("kafka_version", "client", "client_version", "backend")  # what may be chosen beside a preset
CLIENT_KEYS = ("client", "client_version", "clients")


def with_preset(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The preset `name`'s run params (naming the preset), with the kafka_version, client (or
    client_version, either replacing the preset's clients) and backend of `params` where they are
    set: a preset fixes its experiment and its clients, not the versions it runs on."""
    chosen = {key: params[key] for key in VERSIONED if params.get(key) is not None}
    own = dict(preset(name).params)
    if any(key in chosen for key in CLIENT_KEYS):
        for key in CLIENT_KEYS:
            own.pop(key, None)
    return {**own, "preset": name, **chosen}


def observe(run: RunDir, manifest: Manifest, matrix: Iterable[Mapping[str, Any]], statuses: Mapping[str, str]) -> list[dict[str, Any]]:
    """The run's preset observations (`manifest` and `matrix` are the run's), each claim with what
    acklab measured on each scenario it applies to (one per client of the run, or of its family):
    `reproduced`, `not reproduced`, or `untested` (its scenario is missing or incomplete). An
    observation of a client family the run did not include is left out. [] for a run of no preset."""
    from acklab.model.claims import claim
    from acklab.workload.families import row_label

    name = manifest.preset
    if not name or name not in PRESETS:
        return []
    rows = {row["scenario"]: row for row in matrix}
    ran = {entry.client_family for entry in manifest.scenarios}
    found = []
    for observation in PRESETS[name].observations:
        if observation.family is not None and observation.family not in ran:
            continue
        entries = [
            entry for entry in manifest.scenarios
            if f"{entry.profile}__{entry.fault}" == observation.scenario and observation.family in (None, entry.client_family)
        ]
        restated = claim(observation.restates) if observation.restates else None
        for entry in entries or [None]:
            row = None if entry is None else rows.get(entry.scenario)
            if entry is None or row is None or statuses.get(entry.scenario) == "incomplete":
                status, measured = "untested", "the scenario's evidence is missing or incomplete"
            else:
                ok, measured = observation.check(Evidence(row, entry, run, manifest.kafka_version))
                status = "reproduced" if ok else "not reproduced"
            found.append({
                "preset": name, "claim": observation.claim, "scenario": observation.scenario if entry is None else entry.scenario,
                "client": "" if row is None else row_label(row), "status": status, "measured": measured,
                "restates": observation.restates, "documented": None if restated is None else restated.documented,
            })
    return found


def describe(seen: Mapping[str, Any]) -> str:
    """One line for an `observe` item: `OBSERVED reproduced | claim (scenario): measured`."""
    return f"CLAIM {seen['status'].upper()}: {seen['claim']} ({seen['scenario']}{', ' + seen['client'] if seen.get('client') else ''}): {seen['measured']}"

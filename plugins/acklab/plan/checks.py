"""The checks a preset's observation may use, registered by name (`CHECKS`): each is a small pydantic
model of its arguments, called on one scenario's `Evidence`, answering whether the source's claim was
reproduced and what acklab measured (`Finding`).

A presets file names a check as a one-key mapping, the check's name to its arguments
(`{matrix_count: {column: lost, op: "==", value: 0}}`); a check of one argument may take it alone
(`{all_of: [...]}`). Checks combine through the checks that hold others: `all_of`, `any_of`, and by version
`fixed_in` and `affected_versions`. docs/checks.md is generated from this module (`acklab.report.checks_doc`).

A check never asks which client family ran: what differs between families is the family's to say
(`acklab.workload.families`), and an observation about one family says so in its presets file."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from acklab.base.spec import first_error
from acklab.cluster.layout import SERVER_LOG
from acklab.workload import families
from acklab.workload.processing import read_log

if TYPE_CHECKING:
    from acklab.model.claims import Expectation
    from acklab.store.runs import RunDir, ScenarioEntry, WithheldRequest


@dataclass(frozen=True)
class Evidence:
    """One scenario of a finished run: its matrix row, its manifest entry, the run folder, and the
    Kafka version it ran on (its client version is the entry's)."""

    row: Mapping[str, Any]
    entry: ScenarioEntry
    run: RunDir
    kafka_version: str


class Finding(NamedTuple):
    """A check's answer: whether the claim was reproduced, and what acklab measured."""

    reproduced: bool
    measured: str


class Check(BaseModel, ABC):
    """A check: its fields are its arguments in a presets file; `name` is how a file names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: ClassVar[str]

    @abstractmethod
    def __call__(self, e: Evidence) -> Finding:
        """Whether the claim holds on the scenario's evidence `e`, and what was measured."""

    def bug_side(self, e: Evidence) -> Finding | None:
        """The check of the bug this check documents, on `e` if `e`'s version is one the bug is
        documented in: whether `e` shows that bug. None for a check that documents no versioned bug,
        or on a version the bug is not documented in (`acklab explore` labels findings with it)."""
        return None


CHECKS: dict[str, type[Check]] = {}
"""Every check, by the name a presets file gives it."""


def register(name: str) -> Callable[[type[Check]], type[Check]]:
    """Register a check class under `name`."""

    def add(cls: type[Check]) -> type[Check]:
        cls.name = name
        CHECKS[name] = cls
        return cls

    return add


def parse_check(raw: object) -> Check:
    """A check from its presets-file form `{name: arguments}`; ValueError in one line naming what is
    wrong and what is allowed."""
    if isinstance(raw, Check):
        return raw
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ValueError(f"a check is one mapping of a check name to its arguments (e.g. {{matrix_count: {{column: lost, op: '==', value: 0}}}}); valid names: {', '.join(CHECKS)}")
    ((name, args),) = raw.items()
    if name not in CHECKS:
        raise ValueError(f"unknown check {name!r}; valid: {', '.join(CHECKS)}")
    cls = CHECKS[name]
    if args is None:
        args = {}
    elif not isinstance(args, Mapping) and len(cls.model_fields) == 1:
        args = {next(iter(cls.model_fields)): args}
    try:
        return cls.model_validate(args)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise ValueError(f"{name}{'.' + where if where else ''}: {message}") from None


AnyCheck = Annotated[Check, BeforeValidator(parse_check)]
"""A field holding any registered check, in its presets-file form."""

Comparison = Literal["==", ">", ">=", "<", "<="]
COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": int.__eq__, ">": int.__gt__, ">=": int.__ge__, "<": int.__lt__, "<=": int.__le__,
}


def _planned(e: Evidence) -> str:
    return f"{int(e.row.get('planned') or 0):,} planned"


@register("matrix_count")
class MatrixCount(Check):
    """A column of the scenario's matrix row (`lost`, `duplicates`, `failed`, `acked`, ...: docs/evidence.md)
    compared with a value."""

    column: str = Field(description="the matrix column")
    op: Comparison = Field(description="how the column compares with `value`")
    value: int = Field(description="the value it is compared with")

    def __call__(self, e: Evidence) -> Finding:
        observed = int(e.row.get(self.column) or 0)
        return Finding(COMPARE[self.op](observed, self.value), f"{self.column} = {observed:,} of {_planned(e)}")


@register("delivery_errors")
class DeliveryErrors(Check):
    """Some delivery failed with one of the named librdkafka errors; on another client family, with the
    error that family records for them (the Java client: the exception it raises, `acklab.workload.java_errors`).
    Every error the scenario saw is listed, most frequent first."""

    any_of: list[str] = Field(min_length=1, description="librdkafka error names, e.g. _MSG_TIMED_OUT, NOT_ENOUGH_REPLICAS")

    def __call__(self, e: Evidence) -> Finding:
        seen = e.entry.delivery_errors
        wanted = families.named(e.entry.client_family).error_names(self.any_of)
        listed = ", ".join(f"{name} x{n:,}" for name, n in sorted(seen.items(), key=lambda kv: -kv[1])) or "no delivery error"
        return Finding(any(seen.get(name) for name in wanted), f"delivery errors: {listed}")


@register("client_statistic")
class ClientStatistic(Check):
    """A counter of the client's statistics, totalled over the scenario's producers (`acklab.workload.stats`:
    txmsgs, txretries, req_timeouts, disconnects, ...), compared with a value."""

    counter: str = Field(description="the statistics counter")
    op: Comparison = Field(description="how the counter compares with `value`")
    value: int = Field(description="the value it is compared with")

    def __call__(self, e: Evidence) -> Finding:
        observed = int(e.entry.producer_stats.get(self.counter) or 0)
        return Finding(COMPARE[self.op](observed, self.value), f"client statistics {self.counter} = {observed:,}")


@register("median_failure_delay")
class MedianFailureDelay(Check):
    """The median time from a failed record's send to its failure report (the send log) lies within
    [min_s, max_s]: e.g. a record that expires after the delivery timeout, not after a retry."""

    min_s: float = Field(ge=0, description="the shortest median delay, seconds")
    max_s: float = Field(gt=0, description="the longest median delay, seconds")

    def __call__(self, e: Evidence) -> Finding:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if e.entry.send_log is None:
            return Finding(False, "no send log")
        log = pq.read_table(e.run.root / e.entry.send_log, columns=["state", "send_ts", "ack_ts"])
        failed = log.filter(pc.equal(log["state"], "failed"))
        waits = [a - s for s, a in zip(failed["send_ts"].to_pylist(), failed["ack_ts"].to_pylist(), strict=True) if a and s]
        if not waits:
            return Finding(False, "no message failed")
        middle = median(waits)
        return Finding(self.min_s <= middle <= self.max_s, f"{len(waits):,} failed a median {middle:.1f} s after they were sent")


@register("longest_send_pause")
class LongestSendPause(Check):
    """Some producer's sends stopped for at least `at_least_s` (the longest gap between two consecutive
    records one producer sent): a send() call that blocked, e.g. the Java client's wait of up to
    max.block.ms for metadata."""

    at_least_s: float = Field(gt=0, description="the shortest pause that reproduces the claim, seconds")

    def __call__(self, e: Evidence) -> Finding:
        import pyarrow.parquet as pq

        if e.entry.send_log is None:
            return Finding(False, "no send log")
        log = pq.read_table(e.run.root / e.entry.send_log, columns=["producer", "send_ts"]).to_pandas().dropna()
        gaps = log.sort_values("send_ts").groupby("producer")["send_ts"].diff()
        longest = float(gaps.max()) if gaps.notna().any() else 0.0
        return Finding(longest >= self.at_least_s, f"the longest pause between two sends was {longest:.1f} s")


@register("broker_log_lines")
class BrokerLogLines(Check):
    """At least `at_least` lines of the brokers' logs (the server log of each node in the run's cluster
    folders: its own, or its gathered shares') contain `text`."""

    text: str = Field(min_length=1, description="the text a line contains")
    at_least: int = Field(ge=1, description="the fewest such lines that reproduce the claim")

    def __call__(self, e: Evidence) -> Finding:
        found = sum(
            self.text in line
            for folder in e.run.cluster_folders() for log in folder.rglob(SERVER_LOG) for line in log.read_text(errors="replace").splitlines()
        )
        return Finding(found >= self.at_least, f"{found:,} broker log lines with {self.text}")


@register("producer_log_lines")
class ProducerLogLines(Check):
    """At least `at_least` lines of the scenario's producer logs contain `text`; the first is quoted (the
    Java driver logs each error's first message there, as users quote it)."""

    text: str = Field(min_length=1, description="the text a line contains")
    at_least: int = Field(1, ge=1, description="the fewest such lines that reproduce the claim")

    def __call__(self, e: Evidence) -> Finding:
        folder = e.run.scenario(e.entry.scenario).producers
        lines = [line for log in sorted(folder.glob("*.log")) for line in log.read_text(errors="replace").splitlines() if self.text in line]
        quoted = f": {lines[0].strip()[:200]}" if lines else ""
        return Finding(len(lines) >= self.at_least, f"{len(lines):,} producer log lines with {self.text!r}{quoted}")


@register("processor_events")
class ProcessorEvents(Check):
    """At least `at_least` events `event` in the logs of the scenario's pipeline processors
    (`acklab.workload.processing`: e.g. `overran`, a client call that blocked past its timeout), each
    with the fields of `where`; the first is quoted."""

    event: str = Field(min_length=1, description="the processor log event, e.g. overran, aborted, error")
    where: dict[str, str | int | bool] = Field(default_factory=dict, description="fields the event must have, e.g. {call: send_offsets_to_transaction}")
    at_least: int = Field(1, ge=1, description="the fewest such events that reproduce the claim")

    def __call__(self, e: Evidence) -> Finding:
        if e.entry.pipeline is None:
            return Finding(False, "not a pipeline scenario: no processor logs")
        folder = e.run.root / e.entry.pipeline.logs
        events = [(log.stem, event) for log in sorted(folder.glob("processor-*.jsonl")) for event in read_log(log) if event.get("ev") == self.event]
        found = [(where, event) for where, event in events if all(_same(event.get(k), v) for k, v in self.where.items())]
        filtered = f" with {', '.join(f'{k}={v}' for k, v in self.where.items())} (of {len(events):,} {self.event} events)" if self.where else ""
        quoted = ""
        if found:
            where, event = found[0]
            quoted = f"; the first, {where}: " + ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("t", "ev"))[:200]
        return Finding(len(found) >= self.at_least, f"{len(found):,} processor {self.event} events{filtered}{quoted}")


def _same(seen: object, wanted: object) -> bool:
    """A logged field equals a wanted value of the same type (true is not 1)."""
    return type(seen) is type(wanted) and seen == wanted


@register("attempts_per_failure")
class AttemptsPerFailure(Check):
    """Transmissions per failed record, (txmsgs - acked) / failed from the client statistics and the
    matrix row, is at least `at_least`: a record that failed after 1 + retries attempts was sent that
    many times."""

    at_least: int = Field(ge=1, description="the fewest transmissions per failed record")

    def __call__(self, e: Evidence) -> Finding:
        sent, acked, failed = (int(v or 0) for v in (e.entry.producer_stats.get("txmsgs"), e.row.get("acked"), e.row.get("failed")))
        if not failed:
            return Finding(False, "no record failed")
        ratio = (sent - acked) / failed
        return Finding(
            ratio >= self.at_least, f"{sent:,} transmissions for {acked:,} acked and {failed:,} failed records: {ratio:.1f} per failed record"
        )


@register("withheld_replay")
class WithheldReplay(Check):
    """A request the fault withheld was replayed to the broker, which took it (a write: answered NONE for
    some partition, appended; another request such as EndTxn: answered NONE, applied) or refused it (an
    error for every partition, or the request's error), as the fault's withheld log records it."""

    appended: bool = Field(description="true: the broker took the replayed request (a write appended, an EndTxn applied); false: it refused it")

    def __call__(self, e: Evidence) -> Finding:
        held = [request for record in e.entry.fault_timeline for request in record.withheld if not request.queued]
        answered = [answer for request in held for answer in _answers(request).values()]
        if not answered:
            return Finding(False, "no withheld request was replayed and answered" if held else "no request was withheld")
        ok = ("NONE" in answered) if self.appended else all(answer != "NONE" for answer in answered)
        return Finding(ok, "withheld and replayed: " + "; ".join(map(_described, held)))


def _answers(request: WithheldRequest) -> dict[str, str]:
    """partition -> the broker's answer to a replayed produce request (`<topic>-<p>: NAME, ...`); for
    another request (EndTxn, ...) its one error name, as `request` -> NAME."""
    if request.answer and ": " not in request.answer and request.answer != "none expected (acks=0)":
        return {"request": request.answer}
    pairs = (part.rsplit(": ", 1) for part in (request.answer or "").split(", ") if ": " in part)
    return {where.rsplit("-", 1)[-1]: answer for where, answer in pairs}


def _described(request: WithheldRequest) -> str:
    batches = ", ".join(f"partition {b.partition} producer id {b.producer_id} epoch {b.producer_epoch} sequence {b.base_sequence}" for b in request.batches)
    if request.released_at is None:
        fate = "never replayed"
    else:
        fate = "answered " + (", ".join(f"{p}: {a}" for p, a in _answers(request).items()) or request.answer or "nothing")
    return f"{request.api} ({batches or 'no idempotent batch'}) {fate}"


@register("fatal_error")
class FatalError(Check):
    """The producer raised a fatal error whose text contains `contains`."""

    contains: str = Field(min_length=1, description="text of the fatal error, e.g. its error name")

    def __call__(self, e: Evidence) -> Finding:
        error = e.entry.fatal_error
        return Finding(bool(error and self.contains in error), f"fatal error: {error}" if error else "no fatal error")


@register("faults_cover_load")
class FaultsCoverLoad(Check):
    """Every fault of the schedule took effect before the load started and ended after it ended: the
    load ran entirely under it (`{faults_cover_load: {}}`)."""

    def __call__(self, e: Evidence) -> Finding:
        events, start, end = e.entry.fault_timeline, e.entry.load_started, e.entry.load_ended
        if not events or start is None or end is None:
            return Finding(False, "no fault timeline or load times")
        covered = e.entry.fault_effective and all(
            ev.effective_at is not None and ev.effective_at <= start and ev.ended is not None and ev.ended >= end for ev in events
        )
        spans = "; ".join(
            f"{ev.fault} in effect {_rel(ev.effective_at, start)} to {_rel(ev.ended, start)} (load: 0.0 s to {end - start:.1f} s): {ev.effect}"
            for ev in events
        )
        return Finding(bool(covered), spans)


def _rel(ts: float | None, start: float) -> str:
    return "never" if ts is None else f"{ts - start:+.1f} s"


@register("claim_bounds")
class ClaimBounds(Check):
    """The bounds of a claim of acklab's guarantee registry (`acklab.model.claims`) on `columns` (all of
    its bounds if none are named) hold on the matrix row: the observation restates that claim, and the
    report links the claim's documentation. The registry is read when the check runs."""

    claim: str = Field(min_length=1, description="the registry claim's id, e.g. guarantee_at-least-once")
    columns: list[str] = Field(default_factory=list, description="the matrix columns of its bounds it checks (all if empty)")

    def __call__(self, e: Evidence) -> Finding:
        bounds = restated_bounds(self.claim, tuple(self.columns))
        values = {b.column: e.row.get(b.column) for b in bounds}
        measured = ", ".join(f"{column} = {int(value or 0):,}" for column, value in values.items())
        return Finding(all(b.holds(values[b.column]) for b in bounds), f"{measured} of {_planned(e)}")


def restated_bounds(claim_id: str, columns: tuple[str, ...]) -> list[Expectation]:
    """The bounds of the registry claim `claim_id` on `columns` (all if empty); ValueError if it has
    none of them or lacks one."""
    from acklab.model.claims import claim

    bounds = [e for e in claim(claim_id).expectations() if not columns or e.column in columns]
    if not bounds or {e.column for e in bounds} < set(columns):
        raise ValueError(f"claim {claim_id} does not bound all of {columns}")
    return bounds


@register("all_of")
class AllOf(Check):
    """Every one of `checks` holds; what each measured is joined with '; '. Takes its list alone
    (`{all_of: [check, check]}`)."""

    holds: ClassVar[Callable[[Iterable[bool]], bool]] = all  # how the checks' answers combine
    checks: list[AnyCheck] = Field(min_length=1, description="the checks that must all hold")

    def __call__(self, e: Evidence) -> Finding:
        results = [check(e) for check in self.checks]
        return Finding(self.holds(ok for ok, _ in results), "; ".join(text for _, text in results))


@register("any_of")
class AnyOf(AllOf):
    """At least one of `checks` holds; what each measured is joined with '; '. Takes its list alone
    (`{any_of: [check, check]}`)."""

    holds: ClassVar[Callable[[Iterable[bool]], bool]] = any
    checks: list[AnyCheck] = Field(min_length=1, description="the checks of which one must hold")


Component = Literal["kafka", "client"]
"""Whose version a versioned check reads: the brokers' Kafka version, or the scenario's client version."""


def _version_of(component: Component, e: Evidence) -> str:
    return e.kafka_version if component == "kafka" else e.entry.client_version


@register("fixed_in")
class FixedIn(Check):
    """A documented bug and its fix: `before` on a `component` version older than `version`, `after` on
    `version` and later (versions compared numerically, 2.10.0 after 2.3.0)."""

    component: Component = Field(description="kafka (the brokers) or client (the scenario's producer client)")
    version: str = Field(min_length=1, description="the first fixed version")
    before: AnyCheck = Field(description="the check on versions before the fix (the bug)")
    after: AnyCheck = Field(description="the check on the fixed versions")

    def __call__(self, e: Evidence) -> Finding:
        from packaging.version import Version  # presets are read at DAG parse time: only when judging

        ran = _version_of(self.component, e)
        if not ran:
            return Finding(False, f"{self.component} version not recorded")
        ok, measured = (self.before if Version(ran) < Version(self.version) else self.after)(e)
        return Finding(ok, f"{self.component} {ran}: {measured}")

    def bug_side(self, e: Evidence) -> Finding | None:
        from packaging.version import Version

        ran = _version_of(self.component, e)
        return self.before(e) if ran and Version(ran) < Version(self.version) else None


@register("affected_versions")
class AffectedVersions(Check):
    """A bug documented in some versions only: `affected` on the `component` versions listed, `unaffected`
    on every other."""

    component: Component = Field(description="kafka (the brokers) or client (the scenario's producer client)")
    versions: list[str] = Field(min_length=1, description="the versions the bug is documented in")
    affected: AnyCheck = Field(description="the check on the listed versions (the bug)")
    unaffected: AnyCheck = Field(description="the check on every other version")

    def __call__(self, e: Evidence) -> Finding:
        ran = _version_of(self.component, e)
        if not ran:
            return Finding(False, f"{self.component} version not recorded")
        ok, measured = (self.affected if ran in self.versions else self.unaffected)(e)
        return Finding(ok, f"{self.component} {ran}: {measured}")

    def bug_side(self, e: Evidence) -> Finding | None:
        return self.affected(e) if _version_of(self.component, e) in self.versions else None

"""Scenario groups (a fault's profiles side by side) and the evidence rules of a group's entries."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from acklab.base.spec import SpecError
from acklab.cluster.transactions import OpenTransaction, parse_producers
from acklab.nemesis.events import FaultEvent, FaultOutcome
from acklab.nemesis.faults import PLANTING
from acklab.orchestration.execution import Hanging, _entry, _owners, open_transactions
from acklab.plan.params import STANDARD_PIPELINE_FAULTS, STANDARD_PROCESSING, standard_matrix
from acklab.plan.planner import CONTROL_LOAD, CONTROL_SHARE, make_plan, version_grid
from acklab.store.runs import RunDir
from acklab.workload.partitioners import partition_for
from acklab.workload.producer import LoadResult
from acklab.workload.spec import key

RUN = RunDir(Path("/runs/r"))

CONTROLS = [f"negative-control__{fault}" for fault in PLANTING]  # the run's negative controls, each a group of its own, first


def test_a_version_grid_plans_each_distinct_pair_once() -> None:
    """`librdkafka` and `librdkafka:<its locked version>` are one client: the versions DAG's default
    client_versions beside a trigger's `clients: [librdkafka]` ran every Kafka version twice."""
    params = {"profiles": ["leader-ack"], "faults": ["none"]}
    locked = make_plan(params).client
    same = ["librdkafka", f"librdkafka:{locked.version}"]
    plans = version_grid(params, ["4.3.1", "3.9.2"], same)
    assert [(p.topology.kafka_version, p.client) for p in plans] == [("4.3.1", locked), ("3.9.2", locked)]
    with pytest.raises(SpecError, match="2 or more distinct"):
        version_grid(params, ["4.3.1"], same)


def test_side_by_side_groups_one_fault_with_every_profile() -> None:
    plan = make_plan({"profiles": ["leader-ack", "idempotent", "at-least-once"], "faults": ["leader-kill", "ack-loss"]})
    controls, groups = plan.groups()[: len(CONTROLS)], plan.groups()[len(CONTROLS):]
    assert [[s.name for s in g] for g in controls] == [[name] for name in CONTROLS]  # each alone, first, with its own small load
    assert {plan.load_of(g).messages for g in controls} == {CONTROL_LOAD["messages"]} and plan.load_of(groups[0]).messages == plan.params.messages
    shares = {g[0].fault: g[0].schedule[0].options.get("probability") for g in controls}
    assert shares == {"planted-loss": None, "planted-duplicate": CONTROL_SHARE, "planted-offset": CONTROL_SHARE, "planted-misroute": CONTROL_SHARE, "planted-reorder": CONTROL_SHARE}  # loss takes every request
    assert [[s.name for s in g] for g in groups] == [
        ["leader-ack__leader-kill", "idempotent__leader-kill", "at-least-once__leader-kill"],
        ["leader-ack__ack-loss", "idempotent__ack-loss", "at-least-once__ack-loss"],
    ]
    assert all(s.schedule == g[0].schedule for g in groups for s in g)


def test_a_topology_of_one_partition_has_no_misroute_control() -> None:
    """No record can be stored outside the only partition: that control would plant nothing."""
    plan = make_plan({"topology": "single-broker", "profiles": ["idempotent"], "faults": ["none"]})
    assert [g[0].fault for g in plan.groups() if g[0].control] == [f for f in PLANTING if f != "planted-misroute"]


@pytest.mark.parametrize("topology", ["three-brokers", "single-broker", "three-brokers-wide"])
def test_the_reorder_control_sends_its_own_keys_to_the_proxied_leader(topology: str) -> None:
    """planted-reorder's control sends `control_keys` keys (one: a held request shares its partition
    and key with the next one) and targets the leader of the partition its first key maps to; the
    other controls keep the run's keys and partition 0's leader."""
    plan = make_plan({"topology": topology, "profiles": ["idempotent"], "faults": ["none"], "keys": 12})
    controls = {s.fault: s for s in plan.scenarios if s.control}
    reorder = controls.pop("planted-reorder")
    assert PLANTING["planted-reorder"].control_keys == reorder.load.keys == 1
    partition = partition_for(key(0, 0).encode(), plan.topology.partitions, reorder.profile.partitioner)
    assert [step.target for step in reorder.schedule] == [f"leader:{partition}"]
    assert {(s.load.keys, s.schedule[0].target) for s in controls.values()} == {(12, "leader:0")}
    assert reorder.load.model_dump(exclude={"keys"}) == controls["planted-loss"].load.model_dump(exclude={"keys"})


def test_one_at_a_time_makes_a_group_per_scenario() -> None:
    plan = make_plan({"profiles": ["leader-ack", "idempotent"], "faults": ["leader-kill"], "side_by_side": False})
    assert [[s.name for s in g] for g in plan.groups()] == [
        *([name] for name in CONTROLS), ["leader-ack__leader-kill"], ["idempotent__leader-kill"]
    ]


def test_standard_matrix_is_every_profile_by_every_fault_and_every_documented_style_by_the_pipeline_faults() -> None:
    plan = make_plan(standard_matrix())
    params = plan.params
    producers = [s for s in plan.checked if s.pipeline is None]
    pipelines = [s for s in plan.checked if s.pipeline is not None]
    assert len(producers) == len(params.profiles) * len(params.faults) * len(params.clients) >= 72
    assert len(pipelines) == len(STANDARD_PROCESSING) * len(STANDARD_PIPELINE_FAULTS) * len(params.clients)
    assert {s.pipeline.style for s in pipelines if s.pipeline} == set(STANDARD_PROCESSING)
    assert [s.name for s in plan.scenarios if s.control] == [*CONTROLS, "pipeline-control__processor-kill"]
    groups = plan.groups()
    assert len(groups) == len(CONTROLS) + 1 + (len(params.faults) + len(STANDARD_PIPELINE_FAULTS)) * len(params.clients)
    assert all(len({s.pipeline is None for s in group}) == 1 for group in groups)  # pipelines apart from the producers
    assert plan.load.messages / plan.load.rate >= plan.params.fault_at_s + plan.params.fault_duration_s


def test_pipelines_together_share_their_faults_group_and_apart_follow_it() -> None:
    params = {"profiles": ["idempotent"], "processing": ["eos"], "faults": ["none", "processor-kill"], "negative_control": False}
    together = make_plan(params)
    assert [[s.name for s in g] for g in together.groups()] == [["idempotent__none", "pipeline-eos__none"], ["pipeline-eos__processor-kill"]]
    apart = make_plan({**params, "pipelines_together": False})
    assert [[s.name for s in g] for g in apart.groups()] == [["idempotent__none"], ["pipeline-eos__none"], ["pipeline-eos__processor-kill"]]
    assert [apart.group_label(g) for g in apart.groups()] == ["none", "none pipelines", "processor-kill pipelines"]


def _result(started: float, ended: float) -> LoadResult:
    return LoadResult(
        started=started, ended=ended, planned=10, sent=10, acked=10, failed=0, unknown=0, unsent=0, aborted=0, refused=0,
        fatal=0, errors={},
    )


def test_a_fault_that_took_effect_after_the_load_ended_makes_the_evidence_incomplete() -> None:
    plan = make_plan({"profiles": ["at-least-once-bounded"], "faults": ["replicas-down"]})
    (scenario,) = plan.checked
    now = time.time()
    event = FaultEvent("replicas-down", "followers", "stop", started=now + 1, effective=True, effective_at=now + 9)
    late = _entry(plan, scenario, "t", _result(now, now + 5), FaultOutcome([event]), None, RUN)
    assert (late.evidence_complete, late.fault_effective) == (False, False)
    assert "after the load ended" in late.incomplete_reason
    event.effective_at = now + 2
    in_time = _entry(plan, scenario, "t", _result(now, now + 5), FaultOutcome([event]), None, RUN)
    assert (in_time.evidence_complete, in_time.fault_effective) == (True, True)
    # first seen 40 ms after the load ended, missed by the look before, which began during the load: it may have begun then
    event.effective_at, event.effective_after = now + 5.04, now + 4.8
    assert _entry(plan, scenario, "t", _result(now, now + 5), FaultOutcome([event]), None, RUN).evidence_complete
    event.effective_after = now + 5.02  # a look after the load's end still missed it
    assert not _entry(plan, scenario, "t", _result(now, now + 5), FaultOutcome([event]), None, RUN).evidence_complete
    unplanned = _entry(plan, scenario, "t", _result(now, now + 5), FaultOutcome([event]), "t[0] leader 1 -> 2", RUN)
    assert not unplanned.evidence_complete and "unplanned leader change during the load (t[0] leader 1 -> 2)" in unplanned.incomplete_reason


def test_a_load_short_of_its_plan_makes_the_evidence_incomplete() -> None:
    plan = make_plan({"profiles": ["idempotent"], "faults": ["none"]})
    (scenario,) = plan.checked
    now = time.time()
    short = LoadResult(
        started=now, ended=now + 1, planned=10, sent=6, acked=5, failed=1, unknown=0, unsent=4, aborted=0, refused=1,
        fatal=0, errors={"MSG_SIZE_TOO_LARGE": 1}, stop_reasons={"p0": "stopped by SIGTERM"},
    )
    entry = _entry(plan, scenario, "t", short, FaultOutcome([]), None, RUN)
    assert not entry.evidence_complete and entry.planned == 10
    assert entry.incomplete_reason == (
        "sent 6 of 10 planned messages (p0: stopped by SIGTERM); produce() refused 1 messages (MSG_SIZE_TOO_LARGE x1)"
    )


class _Admin:
    """Last stable offsets scripted per call: each call pops the next answer (the last one repeats)."""

    def __init__(self, answers: list[dict[int, tuple[int, int]] | Exception]) -> None:
        self.answers, self.calls, self.closed = answers, 0, False

    def __enter__(self) -> _Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True

    def unstable(self, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        return answer


class _Cluster:
    def __init__(self, admin: _Admin) -> None:
        self._admin = admin

    def admin(self, timeout_s: float = 10.0) -> _Admin:
        return self._admin

    def open_transactions(self, topic: str, partition: int) -> list[OpenTransaction]:
        return [OpenTransaction(producer_id=7, producer_epoch=3, start_offset=90)]


def test_a_partition_whose_stable_offset_stays_behind_after_the_transaction_timeout_holds_a_hanging_transaction(monkeypatch) -> None:
    monkeypatch.setattr("acklab.orchestration.execution.HANGING_MARGIN_S", 0.0)
    plan = make_plan({"profiles": ["transactional"], "faults": ["none"]})
    (scenario,) = plan.checked
    transaction = scenario.profile.transaction.model_copy(update={"timeout_ms": 1000})
    fast = scenario.model_copy(update={"profile": scenario.profile.model_copy(update={"transaction": transaction})})
    markers_late = _Admin([{0: (90, 100)}, {}])  # the commit marker lands a moment later: no hanging transaction
    assert open_transactions(_Cluster(markers_late), {"t": fast}, 2) == {"t": {}}  # type: ignore[arg-type]
    stuck = _Admin([{0: (90, 100)}])
    started = time.monotonic()
    owner = "producer id 7 epoch 3 open since offset 90"
    assert open_transactions(_Cluster(stuck), {"t": fast}, 2) == {"t": {0: Hanging(90, 100, owner)}}  # type: ignore[arg-type]
    assert markers_late.closed and stuck.closed, "open_transactions closes its admin client"
    assert time.monotonic() - started >= 1.0  # it waited out the transaction timeout first
    unreadable = open_transactions(_Cluster(_Admin([RuntimeError("no leader")])), {"t": fast}, 2)  # type: ignore[arg-type]
    assert unreadable == {"t": "last stable offsets not readable: no leader"}

    now = time.time()
    hanging = _entry(plan, fast, "t", _result(now, now + 5), FaultOutcome([]), None, RUN, {0: Hanging(90, 100, owner)})
    assert (hanging.hanging_partitions, hanging.hanging_detail) == (1, f"partition 0: last stable offset 90 < high watermark 100 ({owner})")
    assert hanging.evidence_complete
    ended = _entry(plan, fast, "t", _result(now, now + 5), FaultOutcome([]), None, RUN, {})
    assert (ended.hanging_partitions, ended.hanging_detail) == (0, None)
    blind = _entry(plan, fast, "t", _result(now, now + 5), FaultOutcome([]), None, RUN, "last stable offsets not readable: no leader")
    assert blind.hanging_partitions is None and not blind.evidence_complete


def test_a_hanging_partition_whose_owner_cannot_be_described_stays_counted() -> None:
    class Undescribed(_Cluster):
        def open_transactions(self, topic: str, partition: int) -> list[OpenTransaction]:
            return parse_producers("Exception in thread main")

    assert _owners(Undescribed(_Admin([])), "t", 0).startswith("open transactions not described: no producer table")  # type: ignore[arg-type]


def test_the_open_transactions_of_a_partition_are_read_from_kafkas_describe_producers_table() -> None:
    table = (
        "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset\n"
        "0\t1\t0\t41\t1795646872879\t3001\n"
        "5\t0\t-1\t9\t1795646872000\tNone\n"
    )
    assert parse_producers(table) == [OpenTransaction(0, 1, 3001)]
    with pytest.raises(ValueError, match="no producer table"):
        parse_producers("Exception in thread main")


def test_a_group_runs_its_incomplete_scenarios_once_more_and_keeps_the_first_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt 1: one scenario complete, one incomplete (a broker fenced), one interrupted by SIGTERM;
    only the fenced one runs again, its first run's folder set aside and named in its entry."""
    from acklab.orchestration import execution

    plan = make_plan({"profiles": ["leader-ack", "idempotent", "at-least-once"], "faults": ["none"]})
    run = RunDir(tmp_path)
    calls: list[tuple[int, list[str]]] = []

    def attempt(cluster, plan_, index, group, run_, progress, n):
        calls.append((n, [s.name for s in group]))
        entries = []
        for scenario in group:
            folder = run_.scenario(scenario.name).root
            folder.mkdir(parents=True)
            (folder / "send_log.parquet").write_text(f"attempt {n}")
            entry = _entry(plan_, scenario, f"topic-{n}", _result(time.time(), time.time() + 1), FaultOutcome([]), None, run_)
            if n == 1 and scenario.profile.name == "idempotent":
                entry = entry.model_copy(update={"evidence_complete": False, "incomplete_reason": "unplanned leader change"})
            if n == 1 and scenario.profile.name == "at-least-once":
                entry = entry.model_copy(update={"evidence_complete": False, "incomplete_reason": "sent 5 of 10",
                                                 "stop_reasons": {"p0": "stopped by SIGTERM"}})
            entries.append(entry)
        return entries

    monkeypatch.setattr(execution, "_attempt", attempt)
    entries = execution.run_group(None, plan, len(CONTROLS), run)
    assert calls == [(1, ["leader-ack__none", "idempotent__none", "at-least-once__none"]), (2, ["idempotent__none"])]
    by_name = {e.scenario: e for e in entries}
    retried = by_name["idempotent__none"]
    assert retried.evidence_complete and retried.topic == "topic-2"
    (earlier,) = retried.earlier_attempts
    assert (earlier.topic, earlier.incomplete_reason, earlier.evidence) == ("topic-1", "unplanned leader change", "scenarios/idempotent__none.attempt-1")
    assert (tmp_path / earlier.evidence / "send_log.parquet").read_text() == "attempt 1"
    assert (tmp_path / "scenarios/idempotent__none/send_log.parquet").read_text() == "attempt 2"
    assert run.read_entry("idempotent__none") == retried  # written: the last run's entry
    assert by_name["leader-ack__none"].earlier_attempts == [] and not by_name["at-least-once__none"].evidence_complete
    assert len({e.group.started for e in entries}) == 1

    calls.clear()
    for name in by_name:
        for folder in tmp_path.glob(f"scenarios/{name}*"):
            shutil.rmtree(folder)
    assert not execution.run_group(None, plan, len(CONTROLS), run, attempts=1)[1].evidence_complete
    assert calls == [(1, ["leader-ack__none", "idempotent__none", "at-least-once__none"])]


def test_clients_together_share_a_fault_group_or_take_turns() -> None:
    params = {"clients": ["librdkafka", "java"], "profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill"]}
    together = make_plan(params)
    assert [[s.name for s in g] for g in together.groups()] == [
        *([name] for name in CONTROLS),
        ["leader-ack__none", "idempotent__none", "leader-ack.java__none", "idempotent.java__none"],
        ["leader-ack__leader-kill", "idempotent__leader-kill", "leader-ack.java__leader-kill", "idempotent.java__leader-kill"],
    ]
    assert [together.group_label(g) for g in together.groups()] == [
        *(f"{fault} (negative control)" for fault in PLANTING), "none", "leader-kill",
    ]
    apart = make_plan({**params, "clients_together": False})
    assert [[s.name for s in g] for g in apart.groups()] == [
        *([name] for name in CONTROLS),
        ["leader-ack__none", "idempotent__none"], ["leader-ack.java__none", "idempotent.java__none"],
        ["leader-ack__leader-kill", "idempotent__leader-kill"], ["leader-ack.java__leader-kill", "idempotent.java__leader-kill"],
    ]
    assert [apart.group_label(g) for g in apart.groups()][len(CONTROLS):] == ["none (librdkafka)", "none (java)", "leader-kill (librdkafka)", "leader-kill (java)"]


def test_the_pipelines_faults_count_only_with_processing_styles() -> None:
    """A daily-DAG trigger with `processing: []` keeps the standard `processing_faults`: without a
    style they add no scenario (and the processor faults among them no refusal)."""
    params = {**standard_matrix().model_dump(), "profiles": ["idempotent"], "faults": ["leader-kill"], "processing": []}
    plan = make_plan(params)
    assert [s.name for s in plan.checked] == ["idempotent__leader-kill", "idempotent.java__leader-kill"]

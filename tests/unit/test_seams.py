"""The seams other features plug into: the plan kept once per run (`plan.json`), the claims
registry, one spec per fault, and the client seam."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from acklab.model import beliefs
from acklab.model.claims import BELIEFS, CLAIMS, RULES, Kind, Scope, claim
from acklab.model.guarantees import expect_setting, suite_expectations
from acklab.model.setting import Setting
from acklab.nemesis import actions
from acklab.nemesis.faults import FAULTS, NO_FAULT, PLANTING, Effect, Links, Process, Proxy
from acklab.orchestration import tasks
from acklab.plan.params import standard_matrix
from acklab.plan.planner import RunPlan, make_plan
from acklab.store.runs import LAYOUT, RunDir
from acklab.workload import families, librdkafka
from acklab.workload.client import ClientFamily, FamilyFacts
from acklab.workload.profiles import get_profile

# ---- the plan, made once --------------------------------------------------------------------


def test_the_plan_task_keeps_the_plan_and_later_tasks_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    run = tasks.plan_run({"profiles": ["leader-ack", "idempotent"], "faults": ["none", "leader-kill"], "messages": 4000, "rate": 1000})
    stored = RunDir(Path(run["run_dir"]))
    assert set(run) == {"run_dir", "run_id"}, "the XCom names the run folder, not the params"
    plan = stored.read_plan(RunPlan)
    assert plan == make_plan(plan.params)

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("a later task planned again")

    monkeypatch.setattr(tasks, "make_plan", no_planning)
    groups = tasks.scenario_groups(run)
    assert [g["scenarios"] for g in groups] == [
        *([f"negative-control__{fault}"] for fault in PLANTING), ["leader-ack__none", "idempotent__none"], ["leader-ack__leader-kill", "idempotent__leader-kill"]
    ]
    assert tasks.stored_plan(run) == plan


def test_a_run_folder_has_one_plan(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r")
    plan = make_plan(standard_matrix())
    run.write_plan(plan)
    assert run.read_plan(RunPlan) == plan and len(plan.scenarios) >= 100
    with pytest.raises(FileExistsError):
        run.write_plan(plan)
    assert "plan.json" in dict(LAYOUT) and run.plan.name == "plan.json"


def test_tasks_make_the_plan_at_most_twice() -> None:
    assert inspect.getsource(tasks).count("make_plan(") <= 2


# ---- the claims registry ----------------------------------------------------------------------


def test_every_claim_is_stated_once_and_every_suite_comes_from_a_documented_claim() -> None:
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert set(suite_expectations()) == {c.id for c in CLAIMS if c.documented}
    assert {c.kind for c in BELIEFS} == {Kind.BELIEF} and not any(c.documented for c in BELIEFS)
    assert all(c.documented for c in RULES) and {c.id for c in BELIEFS} == {"in-flight-1-keeps-order", "acks-all-no-loss", "retries-keep-partition"}


def _setting(**changes: object) -> Setting:
    base = Setting.of(get_profile("at-least-once").model_copy(update={"max_in_flight": 1}), make_plan({}).topology,
                      make_plan({"faults": ["leader-kill"]}).checked[0].schedule)
    return dataclasses.replace(base, **changes)


def test_a_claim_applies_to_the_client_families_and_versions_it_is_documented_for() -> None:
    in_flight = claim("in-flight-1-keeps-order")
    assert in_flight.scope.families == frozenset({"librdkafka"})
    assert in_flight.scope.applies(_setting()) and not in_flight.scope.applies(_setting(family="java"))
    assert beliefs.applying(_setting()) == ("in-flight-1-keeps-order", "acks-all-no-loss", "retries-keep-partition")
    assert "in-flight-1-keeps-order" not in beliefs.applying(_setting(family="java"))
    older = Scope("any", lambda s: True, frozenset({"librdkafka"}), "<2.3.0")
    assert older.applies(_setting(client_version="2.2.0")) and not older.applies(_setting(client_version="2.3.0"))
    assert older.applies(_setting()), "an unrecorded version is not excluded by a version range"


def test_a_documented_claim_for_one_family_is_no_expectation_for_another() -> None:
    idempotent = Setting.of(get_profile("idempotent"), make_plan({}).topology, make_plan({"faults": ["leader-kill"]}).checked[0].schedule)
    assert "availability_idempotence-recovers" in {e.suite for e in expect_setting(idempotent).expectations}
    assert "availability_idempotence-recovers" not in {e.suite for e in expect_setting(dataclasses.replace(idempotent, family="java")).expectations}


# ---- one spec per fault -------------------------------------------------------------------------


def test_every_fault_acts_through_its_specs_mechanism() -> None:
    for name, spec in FAULTS.items():
        assert (spec.mechanism is None) == (name == NO_FAULT), name
        assert spec.stops_nodes + spec.needs_proxy + spec.cuts_links <= 1, name
    assert set(actions.ACTIONS) == set(FAULTS) - {NO_FAULT}
    assert isinstance(FAULTS["ack-loss"].mechanism, Proxy) and isinstance(FAULTS["leader-pause"].mechanism, Process)
    assert isinstance(FAULTS["split"].mechanism, Links) and FAULTS["split"].mechanism.pairs == "split"


def test_a_faults_expected_effects_are_efficacy_claims() -> None:
    effects: list[Effect] = [e for spec in FAULTS.values() for e in spec.effects]
    assert effects and all(claim(f"efficacy_{e.name}").kind is Kind.EFFICACY for e in effects)
    assert {claim(f"efficacy_{e.name}").expectations()[0].column for e in effects} >= {"duplicates", "failed_clean", "indeterminate"}


# ---- the client seam ------------------------------------------------------------------------------


def test_librdkafka_is_a_client_family_and_nothing_asks_which_client_runs() -> None:
    family = families.default()
    assert family.name == "librdkafka" and set(families.FAMILIES) == {"librdkafka", "java"} and families.FAMILIES["librdkafka"] is family
    members = {name for kind in (ClientFamily, FamilyFacts) for name in [*vars(kind), *kind.__annotations__] if not name.startswith("_")}
    assert all(hasattr(f, member) for f in families.FAMILIES.values() for member in members), members
    client = family.client(None)
    assert families.of(client) is family and client.family == "librdkafka"
    assert family.config(get_profile("idempotent")) == librdkafka.config(get_profile("idempotent"))
    assert family.defaults["retry.backoff.ms"] == 100
    assert family.label(client) == f"confluent-kafka {client.version} (librdkafka {client.librdkafka})"
    plan = make_plan({"faults": ["none"]})
    assert plan.client == client


def test_every_observation_that_restates_a_claim_names_its_bounds() -> None:
    from acklab.plan.checks import restated_bounds
    from acklab.plan.presets import PRESETS

    restating = [o for p in PRESETS.values() for o in p.observations if o.restates]
    assert len(restating) >= 4
    for observation in restating:
        assert restated_bounds(observation.restates, tuple(observation.check.columns)), observation

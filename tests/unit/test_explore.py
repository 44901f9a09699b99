"""`acklab explore`'s pure parts: the seeded draw of trials from the space, the search guided by faults that reached the client, the known-bug labels of a
red row, the fingerprint that makes two red rows one finding, and bad input refused in one line."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from pathlib import Path

import pytest

from acklab.base.spec import SpecError
from acklab.checker.verdict import FailedExpectation, ScenarioVerdict
from acklab.nemesis.faults import FAULTS
from acklab.nemesis.schedule import FaultStep
from acklab.orchestration.explore import fingerprint, reached
from acklab.plan.checks import Evidence
from acklab.plan.explore import MENU, ExploreSpace, Search, check_budget, explorable_faults, heavier, trials
from acklab.plan.planner import make_plan
from acklab.plan.presets import known_bugs
from acklab.store.runs import FaultRecord, Manifest, RunDir, ScenarioEntry

BROKERS = [1, 2, 3]


def drawn(seed: int, n: int, space: ExploreSpace | None = None, links: bool = False) -> list[dict]:
    return list(itertools.islice(trials(space or ExploreSpace(), seed, 3, BROKERS, links), n))


def test_the_same_seed_draws_the_same_trials_and_another_seed_others() -> None:
    assert drawn(11, 30) == drawn(11, 30)
    assert drawn(11, 30) != drawn(12, 30)


def test_the_planner_takes_most_draws_and_each_draw_stays_within_the_space() -> None:
    space = ExploreSpace(profiles=("idempotent", "leader-ack"), faults=("error-inject", "leader-kill", "lose-then-reject", "latency"))
    planned = 0
    for params in drawn(3, 60, space):
        assert {s["fault"] for s in params["schedule"]} <= set(space.faults)
        assert {p.rsplit("-x", 1)[0] for p in params["profiles"]} <= set(space.profiles)
        assert params["rate"] in MENU.rate and params["messages"] == int(params["rate"] * (params["messages"] / params["rate"]))
        assert params["negative_control"] is False
        for step in params["schedule"]:
            FaultStep.model_validate(step)  # targets and options are ones the fault takes
            assert MENU.fault_duration_s[0] <= step["duration_s"] <= MENU.fault_duration_s[1]
        try:
            plan = make_plan(params)
        except SpecError as exc:  # two process faults overlapping, say: drawn again by the explorer
            assert "\n" not in str(exc)
            continue
        planned += 1
        assert not any(s.control for s in plan.scenarios)
    assert planned >= 45, planned


def test_draws_vary_what_the_issue_asks_for() -> None:
    """Over many draws: overlapping steps, targets other than the default, options drawn, re-tuned
    profiles, several rates and producer counts."""
    many = drawn(5, 300)
    steps = [s for p in many for s in p["schedule"]]
    assert any(len(p["schedule"]) == 2 and p["schedule"][1]["at_s"] < p["schedule"][0]["at_s"] + p["schedule"][0]["duration_s"] for p in many)
    assert any("target" in s for s in steps) and any("target" not in s for s in steps)
    assert {s["options"]["error"] for s in steps if s["fault"] == "error-inject"} > {"NOT_ENOUGH_REPLICAS"}
    assert any(p["custom_profiles"] for p in many) and any(not p["custom_profiles"] for p in many)
    assert {p["rate"] for p in many} == set(MENU.rate) and {p["producers"] for p in many} == set(MENU.producers)
    assert len({s["fault"] for s in steps}) >= len(explorable_faults()) - 8  # link faults only with links


def test_link_faults_are_drawn_only_where_links_can_be_cut() -> None:
    cutting = {name for name in explorable_faults() if FAULTS[name].cuts_links}
    assert cutting
    assert not {s["fault"] for p in drawn(9, 200) for s in p["schedule"]} & cutting
    assert {s["fault"] for p in drawn(9, 200, links=True) for s in p["schedule"]} & cutting


def _load(params: dict) -> tuple[float, dict[str, tuple[int, int]]]:
    """A trial's load length and, per profile's catalog name, its (linger.ms, batch.size) as run."""
    from acklab.workload.profiles import get_profile

    tuned = {}
    for name in params["profiles"]:
        spec = (params.get("custom_profiles") or {}).get(name)
        base = name.rsplit("-x", 1)[0] if spec else name
        linger = spec.get("linger_ms", get_profile(base).linger_ms) if spec else get_profile(base).linger_ms
        tuned[base] = (linger, (spec or {}).get("overrides", {}).get("batch.size", MENU.batch_size[0]))
    return params["messages"] / params["rate"], tuned


def test_a_heavier_variant_keeps_the_faults_and_the_load_length_and_steps_the_batching_up() -> None:
    space = ExploreSpace(profiles=("idempotent", "leader-ack", "transactional"), faults=("error-inject", "leader-kill", "ack-loss"))
    varied = 0
    for number, params in enumerate(drawn(21, 40, space), start=100):
        heavy = heavier(params, random.Random(number), number)
        assert [s["fault"] for s in heavy["schedule"]] == [s["fault"] for s in params["schedule"]]
        assert [s.get("target") for s in heavy["schedule"]] == [s.get("target") for s in params["schedule"]]
        length, before = _load(params)
        heavy_length, after = _load(heavy)
        assert abs(heavy_length - length) < 0.01 and heavy["rate"] == min([r for r in MENU.rate if r > params["rate"]], default=params["rate"])
        assert before.keys() == after.keys() and all(f"{name}-x{number}" in heavy["profiles"] for name in before)
        assert heavy["message_bytes"] == min(MENU.message_bytes) and heavy["producers"] == params["producers"]
        for name, (linger, batch) in after.items():
            assert linger == min([v for v in MENU.linger_ms if v > before[name][0]], default=before[name][0]), (params, heavy)
            assert batch == min([v for v in MENU.batch_size if v > before[name][1]], default=before[name][1]), (params, heavy)
        for step in heavy["schedule"]:
            assert MENU.fault_at_s[0] <= step["at_s"] <= heavy_length * MENU.fault_at_s[1] + 0.05
        try:
            make_plan(heavy)
        except SpecError as exc:  # a batch larger than the topic takes, say: chosen again by the explorer
            assert "\n" not in str(exc)
            continue
        varied += 1
    assert varied >= 30, varied
    top = {**drawn(21, 1, space)[0], "rate": MENU.rate[-1], "messages": int(MENU.rate[-1] * 10)}
    top["profiles"], top["custom_profiles"] = ["idempotent-x1"], {"idempotent-x1": {"enable_idempotence": True, "linger_ms": 1000, "overrides": {"batch.size": 10_000_000}}}
    at_top = heavier(top, random.Random(0), 2)
    assert (at_top["rate"], _load(at_top)[1]) == (MENU.rate[-1], {"idempotent": (1000, 10_000_000)})  # the menu's top stays


def test_the_search_varies_only_trials_whose_faults_reached_the_client_and_repeats_with_the_same_observations() -> None:
    space = ExploreSpace(profiles=("idempotent", "leader-ack"), faults=("error-inject", "leader-kill"))

    def chosen(reached_on: set[int], n: int = 60) -> list[tuple[dict, int | None]]:
        search, out = Search(space, 7, 3, BROKERS, False), []
        for number in range(1, n + 1):
            params, varies = search.next()
            out.append((params, varies))
            search.observe(number, params, number in reached_on)
        return out

    never = chosen(set())
    assert [varies for _, varies in never] == [None] * 60 and [p for p, _ in never] == drawn(7, 60, space)  # told of no fault reaching a client: the draws
    once = chosen({3})
    assert once[:3] == never[:3] and chosen({3}) == once  # the same seed and observations: the same trials
    variants = [(number, params) for number, (params, varies) in enumerate(once, start=1) if varies is not None]
    assert {varies for _, varies in once if varies is not None} == {3}
    assert 15 <= len(variants) <= 45, len(variants)  # about MENU.heavier_share of the trials after trial 3
    assert all(params["rate"] >= once[2][0]["rate"] and f"-x{number}" in params["profiles"][0] for number, params in variants)
    assert [p for p, varies in once if varies is None] != never[: len([v for _, v in once if v is None])]  # the draws moved on


@pytest.mark.parametrize(
    ("stats", "counts", "control", "expected"),
    [
        ({"txmsgs": 9000, "txretries": 0, "disconnects": 0}, {"requests.0.v7": 40, "responses.0": 40}, False, False),  # traffic seen, nothing refused
        ({"txmsgs": 9000, "disconnects": 2}, {}, False, True),  # a broker killed under it
        ({"txmsgs": 9000, "txretries": 0}, {"requests.0.v7": 165, "injected_errors": 165}, False, True),  # partition errors librdkafka counts nowhere
        ({"txmsgs": 9000}, {"dropped_responses": 3}, False, True),
        ({"txmsgs": 9000, "txretries": 4}, {"swallowed_requests": 5}, True, False),  # a negative control's trouble is not the trial's
    ],
)
def test_a_trial_reached_its_client_when_the_client_or_the_faults_counts_say_so(
    stats: dict, counts: dict, control: bool, expected: bool, tmp_path: Path
) -> None:
    run = RunDir(tmp_path)
    entry = ScenarioEntry(scenario="p__f", control=control, producer_stats=stats, fault_timeline=[FaultRecord(fault="f", counts=counts)])
    quiet = ScenarioEntry(scenario="q__none", producer_stats={"txmsgs": 10})
    run.write_manifest(Manifest(run_id=tmp_path.name, scenarios=[quiet, entry]))
    assert reached(run) is expected


def test_the_space_refuses_what_cannot_be_explored_in_one_line() -> None:
    for fault in ("planted-loss", "processor-kill", "group-coordinator-kill", "none", "nope"):
        with pytest.raises(ValueError, match=f"fault '{fault}' cannot be explored; explorable: leader-kill"):
            ExploreSpace(faults=(fault,))
    with pytest.raises(SpecError, match=r"budget_minutes 0: give 0 < N <= 10080"):
        check_budget(0)
    assert check_budget(1.5) == 90


def evidence(row: dict, family: str, version: str, fatal_error: str | None = None) -> Evidence:
    entry = ScenarioEntry(scenario="p__f", client_family=family, client_version=version, fatal_error=fatal_error)
    return Evidence({"planned": 1000, **row}, entry, RunDir(Path("/nonexistent")), "4.3.1")


def test_a_red_row_is_labelled_with_the_known_bug_it_shows_on_a_version_it_is_documented_in() -> None:
    reconstruct = "_INCONSISTENT: Unable to reconstruct MessageSet (currently with 1265 message(s)) with msgid range 43031..51636"
    labels = known_bugs(evidence({"fatal": 95_104}, "librdkafka", "2.4.0", reconstruct))
    assert [(k["preset"], k["state"]) for k in labels] == [("librdkafka-4736", "fixed")]
    assert labels[0]["tracker"] == "https://github.com/confluentinc/librdkafka/issues/4736" and "reconstruct" in labels[0]["measured"]
    assert known_bugs(evidence({"fatal": 95_104}, "librdkafka", "2.5.0", reconstruct)) == []  # fixed there: not that bug
    assert known_bugs(evidence({"fatal": 95_104}, "java", "3.4.0", reconstruct)) == []  # another family
    desync = "OUT_OF_ORDER_SEQUENCE_NUMBER: rewound sequence number"
    assert [k["preset"] for k in known_bugs(evidence({"fatal": 10}, "librdkafka", "2.2.0", desync))] == ["librdkafka-4438"]
    # an open bug, by its signature, on any version of its family
    assert [k["preset"] for k in known_bugs(evidence({"duplicates": 4}, "librdkafka", "2.16.1"))] == ["librdkafka-4953"]
    assert known_bugs(evidence({"duplicates": 4}, "java", "4.1.1")) == []
    assert known_bugs(evidence({"lost": 7}, "librdkafka", "2.16.1")) == []


def row(failed: list[str], fatal_error: str | None = None) -> ScenarioVerdict:
    found = tuple(FailedExpectation("s", "guarantee", expects, expects.split()[0], 1) for expects in failed)
    return ScenarioVerdict("p__f", "idempotent", "fail", found, {}, fatal_error=fatal_error)


def test_one_finding_per_known_bug_or_per_client_and_failed_expectations() -> None:
    known = [{"preset": "librdkafka-4736", "tracker": "t", "state": "fixed", "measured": "m"}]
    assert fingerprint(row(["fatal == 0"]), "librdkafka:2.2.0", known) == "known: librdkafka-4736"
    one = fingerprint(row(["lost == 0", "duplicates == 0"], "Local: Fatal error: OUT_OF_ORDER_SEQUENCE_NUMBER at p0"), "librdkafka:2.2.0", [])
    assert one == "librdkafka:2.2.0: OUT_OF_ORDER_SEQUENCE_NUMBER, duplicates == 0, lost == 0"
    assert fingerprint(row(["duplicates == 0", "lost == 0"], "OUT_OF_ORDER_SEQUENCE_NUMBER again"), "librdkafka:2.2.0", []) == one
    assert fingerprint(row(["lost == 0"]), "librdkafka:2.2.0", []) != one


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-minutes", "0", "--seed", "1"], "budget_minutes 0: give 0 < N <= 10080"),
        (["--budget-minutes", "5", "--seed", "1", "--fault", "planted-loss"], "fault 'planted-loss' cannot be explored"),
        (["--budget-minutes", "5", "--seed", "1", "--profile", "nope"], "unknown profile 'nope'"),
        (["--budget-minutes", "5", "--seed", "1", "--client", "nope:1"], "client 'nope:1'"),
        (["--budget-minutes", "5", "--seed", "1", "--client-version", "1.9.0"], "confluent-kafka releases from 2.0.2 on"),
        (["--budget-minutes", "5", "--seed", "1", "--kafka-version", "9.9.9"], "kafka_version: String should match pattern"),
        (["--budget-minutes", "5", "--seed", "1", "--kafka-version", "4.9.9"], "kafka_version 4.9.9"),
    ],
)
def test_bad_explore_input_is_one_line_and_exit_2_before_anything_is_created(args: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acklab.orchestration.cli", "explore", *args], capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "ACKLAB_RUNS": str(tmp_path / "runs")},
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()

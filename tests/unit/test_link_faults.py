"""Node-to-node link faults as pure logic: which links each fault cuts, the names of a cluster's
link control, plan-time checks, and what the guarantee model expects under a cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from acklab.base.spec import SpecError
from acklab.cluster import links
from acklab.cluster.links import CHAIN_PREFIX, MARK_MASK
from acklab.cluster.topology import load_topology
from acklab.model.claims import Kind
from acklab.model.classes import Guarantee
from acklab.model.guarantees import expect
from acklab.nemesis.actions import cut_pairs
from acklab.nemesis.faults import FAULTS
from acklab.nemesis.schedule import FaultStep
from acklab.plan.params import standard_matrix
from acklab.plan.planner import make_plan
from acklab.workload.profiles import get_profile

LINK_FAULTS = sorted(name for name, spec in FAULTS.items() if spec.cuts_links)
THREE = load_topology("three-brokers")


def step(fault: str, **options: object) -> FaultStep:
    return FaultStep(fault=fault, options=options)


def test_the_link_fault_family() -> None:
    assert LINK_FAULTS == ["leader-isolate", "lossy-link", "node-isolate", "one-way-cut", "split"]
    for name in LINK_FAULTS:
        spec = FAULTS[name]
        assert spec.bounded and spec.silent and spec.moves_leaders and not spec.stops_nodes and not spec.needs_proxy, name
    assert FAULTS["leader-isolate"].targets == {"leader"}


@pytest.mark.parametrize(
    ("fault", "options", "victim", "pairs"),
    [
        ("leader-isolate", {}, 2, {(2, 1), (1, 2), (2, 3), (3, 2)}),
        ("node-isolate", {}, 1, {(1, 2), (2, 1), (1, 3), (3, 1)}),
        ("node-isolate", {"peers": [3]}, 1, {(1, 3), (3, 1)}),
        ("node-isolate", {"peers": [1, 3]}, 1, {(1, 3), (3, 1)}),  # the victim is no peer of itself
        ("one-way-cut", {}, 1, {(1, 2), (1, 3)}),
        ("one-way-cut", {"direction": "in"}, 1, {(2, 1), (3, 1)}),
        ("lossy-link", {"peers": [2]}, 3, {(3, 2), (2, 3)}),
        ("split", {}, 2, {(2, 1), (1, 2), (2, 3), (3, 2)}),  # on three nodes a split isolates one
        ("split", {"side": [1]}, 2, {(1, 3), (2, 3), (3, 1), (3, 2)}),
    ],
)
def test_cut_pairs(fault: str, options: dict, victim: int, pairs: set[tuple[int, int]]) -> None:
    found = cut_pairs(step(fault, **options), victim, [1, 2, 3])
    assert set(found) == pairs and len(found) == len(pairs)


def test_split_of_brokers_and_dedicated_controllers() -> None:
    nodes = load_topology("dedicated-controllers").node_ids
    assert nodes == [1, 2, 3, 101, 102, 103]
    pairs = cut_pairs(step("split", side=[2, 101]), 1, nodes)
    assert {a for a, _ in pairs} == set(nodes) and len(pairs) == 2 * 3 * 3


def test_link_state_names(tmp_path: Path) -> None:
    if links.cgroup2_root() is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    one, two = links.plan(tmp_path, "a", [1, 2, 3]), links.plan(tmp_path, "b", [1, 2, 3])
    assert one.chain != two.chain and one.chain.startswith(CHAIN_PREFIX)
    assert len(one.chain) + len("-abcdef") <= 28  # iptables' limit on chain names, fault chains included
    assert one.cgroup.parent == links.cgroup2_root() and one.cgroup.name.startswith("acklab-")
    assert len(set(one.marks.values())) == 3 and all(mark & MARK_MASK == mark for mark in one.marks.values())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"schedule": [{"fault": "node-isolate", "options": {"peers": [7]}}]}, "params.schedule.0.options.peers: no node 7; nodes are 1, 2, 3"),
        ({"schedule": [{"fault": "split", "options": {"side": [1, 9]}}]}, "params.schedule.0.options.side: no node 9"),
        ({"schedule": [{"fault": "leader-isolate", "target": "follower:0"}]}, "leader-isolate cannot target 'follower:0'; it targets leader"),
        ({"schedule": [{"fault": "lossy-link", "options": {"probability": 1}}]}, "probability: Input should be less than 1"),
        ({"schedule": [{"fault": "one-way-cut", "options": {"direction": "up"}}]}, "direction: Input should be 'out' or 'in'"),
        (
            {"topology": "single-broker", "profiles": ["leader-ack"], "faults": ["node-isolate"]},
            "node-isolate cuts links between nodes; topology single-broker has one node",
        ),
    ],
)
def test_bad_link_fault_params_fail_in_one_line(params: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")) as raised:
        make_plan(params)
    assert "\n" not in str(raised.value)


def test_a_host_without_link_control_fails_at_plan_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("acklab.plan.planner.links_unavailable", lambda: "they need root (iptables rules and cgroups)")
    with pytest.raises(SpecError, match=r"^params\.faults: leader-isolate, lossy-link cut links between nodes, unavailable on this host: they need root"):
        make_plan({"faults": ["leader-kill", "leader-isolate", "lossy-link"]})
    assert not make_plan({"faults": ["leader-kill"]}).cuts_links  # other faults never ask


def test_model_under_a_cut() -> None:
    """acks=1 may lose under a cut; acks=all with min.insync >= 2 and clean election may not;
    unclean election or min.insync=1 may lose even with acks=all."""
    for fault in LINK_FAULTS:
        schedule = [step(fault)]
        assert "lost == 0" not in {e.text() for e in expect(get_profile("leader-ack"), THREE, schedule).expectations}
        for name in ("at-least-once", "idempotent", "transactional"):
            assert "lost == 0" in {e.text() for e in expect(get_profile(name), THREE, schedule).expectations}, (name, fault)
        for weak in (THREE.model_copy(update={"unclean_leader_election": True}), THREE.model_copy(update={"min_insync_replicas": 1})):
            result = expect(get_profile("at-least-once"), weak, schedule)
            assert result.guarantee is Guarantee.LEADER_DURABLE and "lost == 0" not in {e.text() for e in result.expectations}


def test_a_held_request_counts_its_timeout_into_the_outage() -> None:
    """A leader cut off from its followers holds acks=all requests until request.timeout.ms."""
    slow = get_profile("at-least-once").model_copy(update={"request_timeout_ms": 30000})
    availability = {e.text() for e in expect(slow, THREE, [step("leader-isolate")]).expectations if e.kind == Kind.AVAILABILITY}
    assert availability == set()  # 60 s delivery timeout < 10 s cut + 30 s held + 30 s recovery
    availability = {e.text() for e in expect(get_profile("at-least-once"), THREE, [step("leader-isolate")]).expectations if e.kind == Kind.AVAILABILITY}
    assert availability == {"failed_clean == 0", "indeterminate == 0"}


def test_the_standard_matrix_cuts_links_where_the_host_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("acklab.cluster.links.unavailable", lambda: None)
    assert set(LINK_FAULTS) <= set(standard_matrix().faults)
    monkeypatch.setattr("acklab.cluster.links.unavailable", lambda: "they need root (iptables rules and cgroups)")
    faults = standard_matrix().faults
    assert not set(LINK_FAULTS) & set(faults) and len(faults) == sum(spec.standard for spec in FAULTS.values()) - len(LINK_FAULTS)
    make_plan(standard_matrix())  # plannable on such a host

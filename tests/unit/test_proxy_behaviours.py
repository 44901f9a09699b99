"""Each proxy behaviour's options are declared once, in its module of `acklab.proxy.behaviours`: every
proxy fault of `FAULTS` is configured by its behaviour's options model itself, no other options
model of the package redeclares one of their fields, and the proxy's rule carries the options model
itself instead of fields of its own."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

import pytest

import acklab
from acklab.nemesis.faults import FAULTS, Proxy
from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.base import Activation, Options
from acklab.proxy.behaviours.hold_request import WithholdOptions
from acklab.proxy.behaviours.inject_error import ErrorOptions
from acklab.proxy.behaviours.planting import TopicShare
from acklab.proxy.rules import Action, ProxyRule

PACKAGE = Path(acklab.__file__).parent
BEHAVIOURS_DIR = PACKAGE / "proxy" / "behaviours"


def _behaviour_fields() -> set[str]:
    """The option names the behaviours declare (besides the shared base models)."""
    return {name for behaviour in BEHAVIOURS.values() for model in behaviour.option_models for name in model.model_fields}


def _options_classes(source: str) -> list[tuple[str, set[str]]]:
    """(class, annotated field names) of each class named `*Options` in `source`."""
    return [
        (node.name, {item.target.id for item in node.body if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)})
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Options")
    ]


def _redeclared(module: str, source: str) -> list[tuple[str, str, list[str]]]:
    """Options classes of `source` (other than a non-proxy fault's own options model) declaring a
    field a behaviour declares."""
    ours = _behaviour_fields()
    others = {spec.options.__name__ for spec in FAULTS.values() if not isinstance(spec.mechanism, Proxy)}
    return [(module, cls, sorted(fields & ours)) for cls, fields in _options_classes(source) if cls not in others and fields & ours]


def test_every_proxy_fault_uses_its_behaviours_options_model_itself() -> None:
    proxied = {name: spec for name, spec in FAULTS.items() if isinstance(spec.mechanism, Proxy)}
    assert proxied
    for name, spec in proxied.items():
        assert isinstance(spec.mechanism, Proxy)
        behaviour = spec.mechanism.behaviour
        assert BEHAVIOURS[behaviour.name] is behaviour, name
        assert any(spec.options is model for model in behaviour.option_models), (name, spec.options)
        assert issubclass(spec.options, Options), name
        assert spec.options.__module__.startswith("acklab.proxy.behaviours."), (name, spec.options.__module__)


def test_no_options_model_outside_the_behaviours_redeclares_a_behaviour_option() -> None:
    redeclared = [
        found
        for path in PACKAGE.rglob("*.py")
        if BEHAVIOURS_DIR not in path.parents
        for found in _redeclared(str(path.relative_to(PACKAGE)), path.read_text())
    ]
    assert redeclared == []


def test_the_scan_sees_a_redeclared_option() -> None:
    """The scan above finds an options class that redeclares a behaviour's option (so it can fail)."""
    source = "class AckLossOptions(FrameOptions):\n    then: Literal['hold', 'close'] = 'hold'\n"
    assert _redeclared("nemesis/faults.py", source) == [("nemesis/faults.py", "AckLossOptions", ["then"])]


def test_every_behaviour_is_registered_under_its_name_and_counts_its_effect() -> None:
    for name, behaviour in BEHAVIOURS.items():
        assert behaviour.name == name
        assert behaviour.counters, name
    assert {spec.mechanism.behaviour.name for spec in FAULTS.values() if isinstance(spec.mechanism, Proxy)} == set(BEHAVIOURS)


def test_the_proxy_server_never_names_a_behaviour() -> None:
    """The proxy's plumbing asks the active rule's activation what to do: no behaviour's name, nor
    its log's, appears in its source."""
    source = (PACKAGE / "proxy" / "server.py").read_text() + (PACKAGE / "proxy" / "connection.py").read_text()
    names = {name for name in BEHAVIOURS} | {behaviour.log for behaviour in BEHAVIOURS.values() if behaviour.log}
    assert sorted(name for name in names if name in source) == []


def test_every_behaviour_has_an_activation() -> None:
    for name, behaviour in BEHAVIOURS.items():
        assert issubclass(behaviour.activation, Activation), name
        assert behaviour.activation is not Activation, name


def test_the_rule_declares_no_option_of_any_behaviour() -> None:
    """`ProxyRule` is the part every rule has (its behaviour, its options, its lifetime): every
    option, the requests a rule selects (`apis`) and its share (`probability`, `count`) among them,
    is declared by the behaviour's options models alone."""
    assert set(ProxyRule.model_fields) == {"action", "options", "expires_in_s"}
    assert set(ProxyRule.model_fields) & _behaviour_fields() == set()
    assert set(get_args(Action)) == set(BEHAVIOURS)


@pytest.mark.parametrize("model", [model for behaviour in BEHAVIOURS.values() for model in behaviour.option_models], ids=lambda m: m.__name__)
def test_a_rule_crosses_the_control_channel_with_its_options_model(model: type[Options]) -> None:
    """The control channel carries a rule as JSON: the proxy reads back the same options model
    (a behaviour's variant too) with the same values."""
    (behaviour,) = [b for b in BEHAVIOURS.values() if model in b.option_models]
    rule = ProxyRule(action=behaviour.name, options=model(), expires_in_s=7)  # type: ignore[arg-type]
    received = ProxyRule.model_validate(json.loads(json.dumps(rule.model_dump())))
    assert type(received.options) is model and received == rule


def test_the_nemesis_builds_the_rule_from_the_faults_validated_options() -> None:
    options = FAULTS["withhold-replay"].options.model_validate({"apis": ["Heartbeat"], "replay_after": "JoinGroup"})
    rule = ProxyRule(action="hold_request", options=options)
    assert isinstance(rule.options, WithholdOptions) and rule.options.apis == [12] and rule.options.replay_after == 11
    assert rule.matches(12) and not rule.matches(0) and rule.share() == (1.0, 1)
    with pytest.raises(ValueError, match="hold_request is configured by HoldOptions or WithholdOptions, not ErrorOptions"):
        ProxyRule(action="hold_request", options=ErrorOptions())


class _Leaders:
    """`ClusterFacts` with fixed leaders, counting how often it was asked."""

    def __init__(self, leaders: dict[int, int]) -> None:
        self.value, self.asked = leaders, 0

    def leaders(self) -> dict[int, int]:
        self.asked += 1
        return self.value


def test_options_are_completed_from_the_cluster_only_where_the_behaviour_needs_it() -> None:
    """planted-misroute's options take the leaders the cluster names at the fault's start, replacing
    any given; every other behaviour's options stay as given and never ask the cluster."""
    facts = _Leaders({0: 1, 1: 2, 2: 3})
    for name, behaviour in BEHAVIOURS.items():
        options = behaviour.options()
        completed = options.at_start(facts)
        if name == "plant_misroute":
            assert completed.leaders == {0: 1, 1: 2, 2: 3} and type(completed) is type(options)
            given = behaviour.options.model_validate({"leaders": {0: 9}})
            assert given.at_start(facts).leaders == {0: 1, 1: 2, 2: 3}
        else:
            assert completed is options, name
    assert facts.asked == 2


def test_a_topic_whose_plant_the_broker_did_not_take_waits_again() -> None:
    """A planting activation's choice (`TopicShare`, share 0): a topic's first eligible request is
    chosen; once acted on, the topic waits no more, unless the answers show nothing of it planted;
    with `tries`, a topic is chosen at most that many times while it waits."""
    share = TopicShare(0.0)
    assert share.chosen(["a"]) and share.chosen(["a", "b"])  # neither planted yet
    share.planted(["a"])
    assert not share.chosen(["a"]) and share.chosen(["b"])
    share.settled([{"topic": "a", "records": 3, "error": "NOT_LEADER_OR_FOLLOWER"}, {"topic": "a", "records": 2, "error": None}])
    assert share.chosen(["a"])  # refused or unknown: waits again
    share.planted(["a"])
    share.settled([{"topic": "a", "records": 3, "error": "NONE"}, {"topic": "a", "records": 1, "error": "NOT_LEADER_OR_FOLLOWER"}])
    assert not share.chosen(["a"])  # one partition planted: the topic is
    bounded = TopicShare(0.0, tries=2)
    assert [bounded.chosen(["c"]) for _ in range(3)] == [True, True, False]

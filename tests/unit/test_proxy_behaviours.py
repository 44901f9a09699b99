"""Each proxy behaviour's options are declared once, in its module of `acklab.proxy.behaviours`: every
proxy fault of `FAULTS` is configured by its behaviour's options model itself, and no other options
model of the package redeclares one of their fields."""

from __future__ import annotations

import ast
from pathlib import Path

import acklab
from acklab.nemesis.faults import FAULTS, Proxy
from acklab.proxy.behaviours import BEHAVIOURS
from acklab.proxy.behaviours.base import Activation, Options

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

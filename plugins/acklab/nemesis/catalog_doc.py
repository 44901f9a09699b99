"""docs/faults.md, the fault catalog, generated from the `FAULTS` registry (`acklab.nemesis.faults`)
and each fault's options model: per fault its name, kind, what it does, its targets, its options
with their types and defaults, and the evidence that it took effect. `fault_catalog_markdown()` is
the page's text; a unit test checks the committed copy is current."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from acklab.base.paths import PROJECT_ROOT
from acklab.nemesis.faults import FAULTS, FaultSpec, Links, Mechanism, Process, Proxy, ReplicasDown, RollingRestart

DOC = PROJECT_ROOT / "docs" / "faults.md"

INTRO = """\
Every fault a run may ask for (`--fault NAME`, or a schedule step's `fault`), generated from the
`FAULTS` registry (`acklab.nemesis.faults`) by `acklab.nemesis.catalog_doc.fault_catalog_markdown`;
a unit test checks this page is current. What holds for every fault (targets, schedules, the fault
timeline) is in [reference.md](reference.md#faults). Options are given per schedule step
(`options`); an option left out takes its default. A fault is recorded in the manifest's fault
timeline with whether it took effect, and an ineffective fault makes its scenario incomplete."""

_SIGNALS = {
    "kill": "SIGKILL, restarted after the window",
    "stop": "SIGTERM (controlled shutdown), started after the window",
    "pause": "SIGSTOP, SIGCONT after the window",
}
_PAIRS = {"peers": "both ways between the target and its peers", "one-way": "one way only", "split": "every link across the split"}


def _kind(mechanism: Mechanism | None) -> str:
    """The fault's mechanism in words."""
    if isinstance(mechanism, Process):
        return f"broker process: {_SIGNALS[mechanism.signal]}"
    if isinstance(mechanism, RollingRestart):
        return "broker processes: clean restart of each in turn"
    if isinstance(mechanism, ReplicasDown):
        return "broker processes: followers stopped"
    if isinstance(mechanism, Proxy):
        return f"Kafka-aware proxy: rule `{mechanism.action}`"
    if isinstance(mechanism, Links):
        return f"links between nodes: cut {_PAIRS[mechanism.pairs]}"
    return "none (the baseline)"


def _evidence(mechanism: Mechanism | None) -> str:
    """What proves the fault took effect (`acklab.nemesis.actions`)."""
    if isinstance(mechanism, Process):
        return (
            "the cluster reacted: the target partition's leader moved, a `broker:N` target was fenced, a follower left "
            "the ISR or the active controller moved (where nothing can react, the process down or frozen)"
        )
    if isinstance(mechanism, RollingRestart):
        return "every broker was restarted in turn"
    if isinstance(mechanism, ReplicasDown):
        return "the partition's ISR fell below min.insync.replicas"
    if isinstance(mechanism, Proxy):
        counted = " or ".join(f"`{counter}`" for counter in mechanism.counters)
        logs = {
            "hold_request": "; each withheld request is in the event's `withheld`",
            "plant_loss": "; each swallowed batch is in the event's `swallowed`",
            "plant_duplicate": "; each copy and the broker's answer to it is in the event's `duplicated`",
            "plant_offset": "; each shifted answer's partition and its real offset is in the event's `shifted`",
            "plant_misroute": "; each moved partition, where it went and the offset it was appended at is in the event's `misrouted`",
            "plant_reorder": "; each partition appended out of order, both offsets and the records made late is in the event's `reordered`",
            "stall_write": "; each stall of a connection and the request bytes it left waiting is in the event's `write_stalls`",
        }
        return f"the proxy counted {counted} on the target broker(s) in the window (the event's `counts`){logs.get(mechanism.action, '')}"
    if isinstance(mechanism, Links):
        if mechanism.seen == "leader-moved":
            return "the isolated leader's partition leadership moved away (looked for up to 10 s after the heal)"
        return (
            "a broker at either end was fenced, the target partition's leader moved or its ISR shrank, or the active controller "
            "moved (looked for up to 10 s after the heal); with `probability` < 1, packets were dropped (`dropped_packets`)"
        )
    return "nothing to prove"


def _type(annotation: Any) -> str:
    """A field's type as written in Python (`int | None`, `list[int]`, `Literal['out', 'in']`)."""
    text = annotation.__name__ if isinstance(annotation, type) and not getattr(annotation, "__args__", None) else str(annotation)
    return re.sub(r"\b(typing|builtins)\.", "", text).replace("NoneType", "None")


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return f"`{field.default_factory()!r}`"
    return "required" if field.default is PydanticUndefined else f"`{field.default!r}`"


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _bounds(field: Any) -> str:
    """A field's numeric bounds (`>= 0, <= 1`), from its constraints."""
    return ", ".join(f"{sign} {getattr(c, attr)}" for c in field.metadata for attr, sign in _BOUNDS if getattr(c, attr, None) is not None)


def _options(model: type[BaseModel]) -> list[str]:
    if not model.model_fields:
        return ["No options."]
    rows = ["| option | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        cells = (f"`{name}`", f"`{_type(field.annotation)}`", _default(field), _bounds(field), field.description or "")
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return rows


def _section(spec: FaultSpec) -> list[str]:
    lines = [f"## `{spec.name}`", "", spec.description[0].upper() + spec.description[1:] + ".", ""]
    facts = [
        ("kind", _kind(spec.mechanism)),
        ("default target", f"`{spec.default_target}`" if spec.default_target else "none"),
        ("targets", ", ".join(f"`{t}`" for t in sorted(spec.targets)) or "none"),
        ("in the standard matrix", "yes" if spec.standard else "no (runs when a run names it)"),
        ("evidence it took effect", _evidence(spec.mechanism)),
    ]
    lines += [f"- **{label}**: {value}" for label, value in facts]
    if options := _options(spec.options):
        lines += ["", *options]
    return [*lines, ""]


def fault_catalog_markdown() -> str:
    """The text of docs/faults.md, from `FAULTS`, in registry order."""
    lines = ["# Fault catalog", "", INTRO, "", "| fault | kind |", "|---|---|"]
    lines += [f"| [`{spec.name}`](#{spec.name}) | {_kind(spec.mechanism)} |" for spec in FAULTS.values()]
    lines.append("")
    for spec in FAULTS.values():
        lines += _section(spec)
    return "\n".join(lines).rstrip("\n") + "\n"


def write() -> None:
    """Rewrite docs/faults.md."""
    DOC.write_text(fault_catalog_markdown())

"""Named presets: a whole experiment (topology, profiles, fault schedule, load) under one name, with
where it comes from and what it shows. `acklab run --preset NAME`, `acklab presets`, and the DAGs'
`preset` param run them; the run params are validated like any others (`acklab.plan`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acklab.spec import SpecError


@dataclass(frozen=True)
class Preset:
    name: str
    source: str  # e.g. "field-notes #2", "librdkafka #3584 / PR #4438"
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)  # RunParams fields

    def summary(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "description": self.description}


PRESETS: dict[str, Preset] = {}


def preset(name: str) -> Preset:
    """The preset called `name`; SpecError listing the presets otherwise."""
    if name not in PRESETS:
        raise SpecError(f"unknown preset {name!r}; valid: {', '.join(sorted(PRESETS)) or '(none)'}")
    return PRESETS[name]


VERSIONED = ("kafka_version", "client_version", "backend")  # what may be chosen beside a preset


def with_preset(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The preset `name`'s run params, with the kafka_version, client_version and backend of
    `params` where they are set: a preset fixes its experiment, not the versions it runs on."""
    return {**preset(name).params, **{key: params[key] for key in VERSIONED if params.get(key) is not None}}

"""Presets files: named experiments as data. A presets file (YAML) maps each preset's name to where it
comes from, what it runs (its params: a DAG conf's fields, `acklab.plan.params.RunParams`) and what
its source claims happens, each claim with the check of `acklab.plan.checks` that tests it.

The catalog's files are `catalog/presets/*.yaml`; a team adds its own file with claims about its own
setup and runs it with `acklab run --presets-file FILE --preset NAME`. A DAG trigger names a presets
file by NAME only (`NAME.yaml` in the catalog's folder or in the folder `ACKLAB_PRESETS_DIR` names):
triggers are untrusted, and a path in one is refused. Every problem is one line naming the file and
the entry (`SpecError`), raised when the file is read, before anything runs."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from acklab.base.spec import SpecError, first_error, load_yaml, parse_model
from acklab.plan.checks import AnyCheck, ClaimBounds
from acklab.plan.params import RunParams
from acklab.workload import families
from acklab.workload.processing import scenario_line

CATALOG_FOLDER = "catalog/presets"
PRESETS_DIR_ENV = "ACKLAB_PRESETS_DIR"
"""The environment variable naming a folder of the team's own presets files, which a DAG trigger may name."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
"""A presets file's NAME (its file is NAME.yaml): no path, no dots."""


class Observation(BaseModel):
    """What a source says happens in one scenario of the preset's run, and the check that tests it; on
    the scenario of each client of the run, or only on those of `families`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    claim: str = Field(min_length=1, description="what the source says happens")
    scenario: str = Field(pattern=r"^[^_].*__.+$", description="`<profile>__<fault>` of the preset's run (a run's other clients tag the profile)")
    families: tuple[str, ...] | None = Field(None, min_length=1, description="the client families it is about (default: every client of the run)")
    check: AnyCheck = Field(description="the check that tests the claim (`acklab.plan.checks`)")

    @field_validator("families")
    @classmethod
    def _known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and (unknown := [name for name in value if name not in families.FAMILIES]):
            raise ValueError(f"unknown client family {unknown[0]!r}; valid: {', '.join(families.FAMILIES)}")
        return value

    @property
    def restates(self) -> str | None:
        """The id of the registry claim (`acklab.model.claims`) it restates: its check's, if it is `claim_bounds`."""
        return self.check.claim if isinstance(self.check, ClaimBounds) else None

    def applies_to(self, family: str) -> bool:
        """Whether it is checked on the scenarios of client family `family`."""
        return self.families is None or family in self.families


class TrackerState(BaseModel):
    """What a bug preset's tracker entry said when it was last read: `open` (not fixed in any release),
    `fixed` (a release holds the fix), or `not a bug` (closed as documented behaviour or as invalid)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    state: Literal["open", "fixed", "not a bug"] = Field(description="open, fixed, or not a bug")
    seen: str = Field(min_length=1, description="what the tracker showed: its status, the fix and the release holding it")
    checked: date = Field(description="when the tracker was read (YYYY-MM-DD)")


class Signature(BaseModel):
    """How an open bug (one no versioned check documents) shows in a red row of one of its client
    families, on any version: `acklab explore` labels such a finding with the bug's tracker entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    families: tuple[str, ...] = Field(min_length=1, description="the client families the bug is in")
    check: AnyCheck = Field(description="the check a red row of the bug passes (`acklab.plan.checks`)")

    @field_validator("families")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if unknown := [name for name in value if name not in families.FAMILIES]:
            raise ValueError(f"unknown client family {unknown[0]!r}; valid: {', '.join(families.FAMILIES)}")
        return value


class Preset(BaseModel):
    """A whole experiment (topology, profiles, fault schedule, load) under one name, with where it comes
    from, what its source claims, and how each claim is checked against the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", description="its name (`acklab run --preset NAME`)")
    source: str = Field(min_length=1, description="where it comes from, e.g. 'field-notes #2' or a tracker entry's title")
    description: str = Field(min_length=1, description="what it runs and what it shows")
    tracker: str = Field("", description="a bug preset's tracker entry (URL)")
    tracker_state: TrackerState | None = Field(None, description="a bug preset's tracker entry as last read (the catalog's bugs all say it)")
    params: dict[str, Any] = Field(description="its run params (RunParams' fields but preset)")
    observations: tuple[Observation, ...] = Field(min_length=1, description="what its source claims, each with its check")
    signature: Signature | None = Field(
        None, description="an open bug's signature in any red row of its families (a fixed bug's is the bug side of its versioned checks)"
    )

    @field_validator("params")
    @classmethod
    def _run_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "preset" in value or "presets_file" in value:
            raise ValueError("a preset's params do not name a preset (its name does)")
        try:
            parse_model(RunParams, value, "params")
        except SpecError as exc:
            raise ValueError(str(exc).removeprefix("params: ")) from None
        return value

    @model_validator(mode="after")
    def _tracker_read(self) -> Preset:
        if self.tracker_state is not None and not self.tracker:
            raise ValueError("tracker_state is the state of the tracker entry: give its URL as tracker")
        return self

    @model_validator(mode="after")
    def _scenarios_of_its_profiles(self) -> Preset:
        profiles = self.params.get("profiles", RunParams.model_fields["profiles"].get_default(call_default_factory=True))
        profiles = [*profiles, *(scenario_line(style) for style in self.params.get("processing", []))]  # a pipeline's scenarios
        for n, observation in enumerate(self.observations):
            profile = observation.scenario.split("__", 1)[0]
            if profile not in profiles:
                raise ValueError(f"observations.{n}.scenario: {observation.scenario!r} is not of one of its profiles ({', '.join(profiles)})")
        return self

    def summary(self) -> dict[str, str]:
        known = self.tracker_state
        return {
            "name": self.name, "source": self.source, "description": self.description, **({"tracker": self.tracker} if self.tracker else {}),
            **({"tracker_state": f"{known.state} ({known.seen}; read {known.checked.isoformat()})"} if known else {}),
        }


def load_presets(path: Path) -> dict[str, Preset]:
    """The presets of the presets file at `path`, by name; SpecError in one line naming the file and
    the preset."""
    document = load_yaml(path, "presets file")
    if not isinstance(document, dict) or not document:
        raise SpecError(f"presets file {path}: expected a mapping of preset name -> {{source, description, params, observations}}")
    found = {}
    for name, spec in document.items():
        where = f"presets file {path}: preset {name}"
        if not isinstance(spec, Mapping):
            raise SpecError(f"{where}: expected a mapping of source, description, tracker, tracker_state, params, observations")
        try:
            found[str(name)] = Preset.model_validate({"name": str(name), **spec})
        except ValidationError as exc:
            field, message = first_error(exc)
            raise SpecError(f"{where}: {field + ': ' if field else ''}{message}") from None
    return found


@cache
def catalog_files() -> dict[str, dict[str, Preset]]:
    """The catalog's presets files (`catalog/presets/NAME.yaml`) by NAME, each file's presets by name;
    SpecError if a file is invalid or two files name one preset."""
    files: dict[str, dict[str, Preset]] = {}
    seen: dict[str, str] = {}
    for path in sorted(catalog_folder().glob("*.yaml")):
        files[path.stem] = load_presets(path)
        for preset in files[path.stem]:
            if preset in seen:
                raise SpecError(f"presets file {path}: preset {preset}: also in {seen[preset]}.yaml")
            seen[preset] = path.stem
    return files


def catalog_folder() -> Path:
    """The catalog's presets folder on disk."""
    return Path(str(resources.files("acklab").joinpath(CATALOG_FOLDER)))


def resolve_presets_file(value: str, *, paths: bool) -> Path:
    """The presets file `value` names: a NAME (`NAME.yaml` in the catalog's folder or in
    `$ACKLAB_PRESETS_DIR`), or, if `paths`, a file path. SpecError in one line otherwise: a trigger
    (`paths` false) may not name a path."""
    folders = [catalog_folder(), *([Path(os.environ[PRESETS_DIR_ENV])] if os.environ.get(PRESETS_DIR_ENV) else [])]
    where = " or ".join(f"{folder}" for folder in folders)
    if re.match(NAME_PATTERN, value):
        found = [folder / f"{value}.yaml" for folder in folders if (folder / f"{value}.yaml").is_file()]
        if len(found) > 1:
            raise SpecError(f"presets_file {value!r}: both {found[0]} and {found[1]} exist; rename the one in {PRESETS_DIR_ENV}")
        if found:
            return found[0]
        if not paths:
            raise SpecError(f"presets_file {value!r}: no {value}.yaml in {where} (set {PRESETS_DIR_ENV} to the folder of your presets files)")
    if not paths:
        raise SpecError(
            f"presets_file {value!r}: a DAG run names a presets file by NAME (its NAME.yaml in {where}; NAME of letters, digits, - and _), not by path"
        )
    return Path(value).expanduser().resolve()


def given_presets_file(value: str) -> str:
    """How run params keep a presets file given on the command line: a NAME as it is (unless a file of
    that name is at hand), a path made absolute (the run's params are read again after it ran, to check
    its observations)."""
    if re.match(NAME_PATTERN, value) and not Path(value).is_file():
        return value
    return str(Path(value).expanduser().resolve())

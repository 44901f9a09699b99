"""Named presets: looking one up, making its run params, and checking its observations against a
finished run. The presets themselves are data (`catalog/presets/*.yaml`, read by
`acklab.plan.preset_files`; their checks are `acklab.plan.checks`).

`acklab run --preset NAME [--presets-file FILE]`, `acklab presets`, the DAGs' `preset` and
`presets_file` params and the weekly `kafka_field_notes` DAG run them; their run params are
validated like any others (`acklab.plan.planner`). A preset's observations are findings
("reproduced" or not, with what acklab measured); the run's verdict stays the guarantee model's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from acklab.base.spec import SpecError
from acklab.plan.checks import Evidence
from acklab.plan.preset_files import Preset, catalog_files, load_presets, resolve_presets_file
from acklab.workload import families
from acklab.workload.processing import scenario_line

if TYPE_CHECKING:
    from acklab.store.runs import Manifest, RunDir, ScenarioEntry

PRESETS: dict[str, Preset] = {name: preset for presets in catalog_files().values() for name, preset in presets.items()}
"""Every preset of the catalog, by name."""
BUGS: dict[str, Preset] = catalog_files()["bugs"]
"""Documented client and broker bugs, each rediscovered (or not) per version: run them across versions
(`acklab run --preset NAME --client FAMILY:VERSION ... --kafka-version ...`, or the version-regression DAG)."""
FIELD_NOTES: tuple[str, ...] = tuple(catalog_files()["field-notes"])
"""The field notes' presets, which the weekly field-notes DAG runs, in their file's order."""

VERSIONED = ("kafka_version", "client", "client_version", "backend")  # what may be chosen beside a preset
CLIENT_KEYS = ("client", "client_version", "clients")


def presets_of(presets_file: str | None) -> dict[str, Preset]:
    """The presets of `presets_file` (a NAME or a path, as run params store it: `resolve_presets_file`),
    or the catalog's if None; SpecError in one line if the file is missing or invalid."""
    if presets_file is None:
        return PRESETS
    return load_presets(resolve_presets_file(presets_file, paths=True))


def preset(name: str, presets_file: str | None = None) -> Preset:
    """The preset called `name` (of `presets_file`, else of the catalog); SpecError listing the presets otherwise."""
    known = presets_of(presets_file)
    if name not in known:
        where = f" in presets file {presets_file}" if presets_file is not None else ""
        raise SpecError(f"unknown preset {name!r}{where}; valid: {', '.join(sorted(known)) or '(none)'}")
    return known[name]


def with_preset(name: str, params: Mapping[str, Any], presets_file: str | None = None) -> dict[str, Any]:
    """The preset `name`'s run params (naming the preset, and its presets file if it is not the
    catalog's), with the kafka_version, client (or client_version, either replacing the preset's
    clients) and backend of `params` where they are set: a preset fixes its experiment and its
    clients, not the versions it runs on."""
    chosen = {key: params[key] for key in VERSIONED if params.get(key) is not None}
    own = dict(preset(name, presets_file).params)
    if any(key in chosen for key in CLIENT_KEYS):
        for key in CLIENT_KEYS:
            own.pop(key, None)
    return {**own, "preset": name, **({"presets_file": presets_file} if presets_file is not None else {}), **chosen}


def run_preset(manifest: Manifest) -> Preset | None:
    """The preset a run's params came from (None if none, or if its presets file is no longer readable)."""
    params = next((p for p in manifest.params if p.get("preset")), None)
    if params is None:
        return None
    try:
        return preset(params["preset"], params.get("presets_file"))
    except SpecError:
        return None


def is_catalog_bug(manifest: Manifest) -> bool:
    """Whether the run is of one of the catalog's bug presets (`BUGS`)."""
    params = next((p for p in manifest.params if p.get("preset")), None)
    return params is not None and params.get("presets_file") is None and params["preset"] in BUGS


def observe(run: RunDir, manifest: Manifest, matrix: Iterable[Mapping[str, Any]], statuses: Mapping[str, str]) -> list[dict[str, Any]]:
    """The run's preset observations (`manifest` and `matrix` are the run's), each claim with what
    acklab measured on each scenario it applies to (one per client of the run, or of its families):
    `reproduced`, `not reproduced`, or `untested` (its scenario is missing or incomplete). An
    observation of client families the run did not include is left out. [] for a run of no preset."""
    from acklab.model.claims import claim
    from acklab.workload.families import row_label

    found_preset = run_preset(manifest)
    if found_preset is None:
        return []
    name = found_preset.name
    rows = {row["scenario"]: row for row in matrix}
    ran = {entry.client_family for entry in manifest.scenarios}
    found = []
    for observation in found_preset.observations:
        if observation.families is not None and not set(observation.families) & ran:
            continue
        entries = [
            entry for entry in manifest.scenarios
            if f"{_line(entry)}__{entry.fault}" == observation.scenario and observation.applies_to(entry.client_family)
        ]
        restated = claim(observation.restates) if observation.restates else None
        for entry in entries or [None]:
            row = None if entry is None else rows.get(entry.scenario)
            if entry is None or row is None or statuses.get(entry.scenario) == "incomplete":
                status, measured = "untested", "the scenario's evidence is missing or incomplete"
            else:
                ok, measured = observation.check(Evidence(row, entry, run, manifest.kafka_version))
                status = "reproduced" if ok else "not reproduced"
            found.append({
                "preset": name, "claim": observation.claim, "scenario": observation.scenario if entry is None else entry.scenario,
                "client": "" if row is None else row_label(row), "status": status, "measured": measured,
                "restates": observation.restates, "documented": None if restated is None else restated.documented,
            })
    return found


def _line(entry: ScenarioEntry) -> str:
    """What an observation's scenario names before `__<fault>`: the entry's profile, or for a pipeline `pipeline-<style>`."""
    return entry.profile if entry.pipeline is None else scenario_line(entry.pipeline.style)


def describe(seen: Mapping[str, Any]) -> str:
    """One line for an `observe` item: `CLAIM REPRODUCED: claim (scenario, client): measured`."""
    return f"CLAIM {seen['status'].upper()}: {seen['claim']} ({seen['scenario']}{', ' + seen['client'] if seen.get('client') else ''}): {seen['measured']}"


def preset_families(found: Preset) -> set[str]:
    """The client families a preset's run includes: its clients', else confluent-kafka's."""
    specs = found.params.get("clients") or ([found.params["client"]] if found.params.get("client") else [])
    return {spec.partition(":")[0] for spec in specs} or {families.DEFAULT}


def known_bugs(e: Evidence) -> list[dict[str, str]]:
    """The catalog's bugs (`BUGS`) a red row's evidence `e` shows: a fixed bug whose versioned check's
    bug side (`Check.bug_side`) holds on `e`, on a client family its preset runs and its observation
    is about; an open bug whose `signature` holds on a row of its families. Each as {preset, tracker,
    state, measured}."""
    family = e.entry.client_family
    found = []
    for name, bug in BUGS.items():
        seen = None
        if bug.signature is not None and family in bug.signature.families:
            ok, measured = bug.signature.check(e)
            seen = measured if ok else None
        for observation in bug.observations if family in preset_families(bug) else ():
            if seen is None and observation.applies_to(family) and (side := observation.check.bug_side(e)) is not None and side.reproduced:
                seen = side.measured
        if seen is not None:
            state = bug.tracker_state.state if bug.tracker_state else "unknown"
            found.append({"preset": name, "tracker": bug.tracker, "state": state, "measured": seen})
    return found

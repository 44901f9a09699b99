"""DAG trigger-form params, generated from `RunParams`' JSON schema (types, bounds, patterns,
descriptions: each stated once, in the model) plus the enums known only at run time (topologies,
profiles, faults). Cheap to import: DAG files call it at parse time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Param

from acklab.base.maven import KAFKA_VERSION_PATTERN
from acklab.base.property_policy import CLIENT_FAMILIES, refused_names_schema
from acklab.cluster.topology import topology_names
from acklab.nemesis.faults import FAULT_NAMES, NO_FAULT
from acklab.plan.params import RunParams
from acklab.plan.preset_files import NAME_PATTERN
from acklab.plan.presets import PRESETS
from acklab.workload import families
from acklab.workload.processing import TUNABLE_PROPERTY
from acklab.workload.profiles import profile_names

SCHEMA_NOISE = ("title", "default")


def _resolve(schema: Any, defs: Mapping[str, Any]) -> Any:
    """`schema` with every `$ref` replaced by its definition, recursively."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _resolve(v, defs) for k, v in schema.items() if k not in SCHEMA_NOISE}
    if isinstance(schema, list):
        return [_resolve(item, defs) for item in schema]
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's `anyOf: [X, {type: null}]` as X with `type: [X's type, "null"]` (forms render it)."""
    options = schema.get("anyOf")
    if not options or {"type": "null"} not in options or len(options) != 2:
        return schema
    (other,) = [option for option in options if option != {"type": "null"}]
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    enum = other.get("enum")
    return {**rest, **other, "type": [other["type"], "null"], **({"enum": [*enum, None]} if enum else {})}


def run_time_enums() -> dict[str, dict[str, Any]]:
    """Schema additions for fields whose allowed values come from the catalogs and clusters/."""
    profiles, faults = profile_names(), list(FAULT_NAMES)
    # `examples` makes the trigger form show an array as a multi-select of these values.
    return {
        "topology": {"enum": topology_names()},
        # any name: a run's own custom_profiles may add some (checked by `plan`); the catalog's are examples
        "profiles": {"items": {"type": "string"}, "uniqueItems": True, "examples": profiles},
        "faults": {"items": {"type": "string", "enum": faults}, "uniqueItems": True, "examples": faults},
        # a trigger names a presets file by NAME only (`acklab.plan.preset_files.resolve_presets_file`), never a path
        "presets_file": {"pattern": NAME_PATTERN},
        # properties that load code, read files or reach other hosts (`acklab.base.property_policy`)
        "broker_config": refused_names_schema("broker"),
        "custom_profiles": {"additionalProperties": {"type": "object", "properties": {
            family: {"type": "object", **refused_names_schema(family)} for family in CLIENT_FAMILIES
        }}},
    }


def run_params_schema() -> dict[str, dict[str, Any]]:
    """Each `RunParams` field's JSON schema as the trigger form validates it; `preset` is left to the
    DAGs' own param (`preset_param`), which picks one of the presets."""
    schema = RunParams.model_json_schema()
    defs = schema.get("$defs", {})
    enums = run_time_enums()
    fields = {}
    for name, prop in schema["properties"].items():
        if name == "preset":
            continue
        field = _nullable(_resolve(prop, defs))
        fields[name] = {**field, **enums.get(name, {})}
    # A step's other fields are checked by `plan`; a compact schema keeps parsing fast (Airflow
    # deep-copies every param into every task).
    processor_config = fields["processor_config"]["properties"]
    for sides in (processor_config, *(processor_config[family]["properties"] for family in CLIENT_FAMILIES)):
        for side in ("consumer", "producer"):  # the processors take tunable names only (`ProcessorConfig`)
            sides[side]["propertyNames"] = {"pattern": TUNABLE_PROPERTY.pattern}
    fields["schedule"]["items"] = {
        "type": "object", "required": ["fault"], "properties": {"fault": {"enum": [f for f in FAULT_NAMES if f != NO_FAULT]}},
    }
    return fields


def dag_params(defaults: RunParams, drop: Iterable[str] = (), extra: Mapping[str, Param] | None = None) -> dict[str, Param]:
    """The DAG's params: every `RunParams` field (but `drop`) with `defaults`' values, then `extra`."""
    values = defaults.model_dump(mode="json")
    params = {name: Param(values[name], **field) for name, field in run_params_schema().items() if name not in set(drop)}
    return {**params, **(extra or {})}


def version_params() -> dict[str, Param]:
    """Only the run's Kafka and client version params, as `RunParams` states them (default: null)."""
    fields = run_params_schema()
    return {name: Param(None, **fields[name]) for name in ("kafka_version", "client", "client_version")}


def preset_param() -> Param:
    """A named preset instead of the params (only the versions, the backend and its presets file combine
    with it): the catalog's presets are its examples, a `presets_file` may name others."""
    return Param(
        None, type=["null", "string"], examples=sorted(PRESETS),
        description="Run a named preset (acklab presets) instead of the params above; only the versions, backend and "
        "presets_file apply beside it",
    )


MAX_SHARES = 16


def shares_param(default: int = 2) -> Param:
    """The shares DAG's share count: its groups dealt into this many shares (fewer if it has fewer groups)."""
    return Param(
        default, type="integer", minimum=1, maximum=MAX_SHARES,
        description="Deal the run's scenario groups into this many shares, each on its own cluster on whichever worker takes it "
        "(fewer if the run has fewer groups)",
    )


def kafka_versions_param(versions: list[str]) -> Param:
    """The version-regression DAG's list of Kafka versions."""
    return Param(
        versions, type="array", minItems=1, uniqueItems=True, items={"type": "string", "pattern": KAFKA_VERSION_PATTERN},
        description="Kafka versions to run the same matrix on, side by side, with each client version (each fetched by `acklab setup`)",
    )


def clients_param(clients: list[str]) -> Param:
    """The version-regression DAG's list of producer clients of any family."""
    return Param(
        clients, type="array", uniqueItems=True, items={"type": "string", "pattern": families.CLIENT_PATTERN},
        description="Producer clients FAMILY:VERSION (java:3.9.1, librdkafka:2.16.1), with each Kafka version, beside client_versions",
    )


def client_versions_param(versions: list[str]) -> Param:
    """The version-regression DAG's list of producer client versions."""
    return Param(
        versions, type="array", uniqueItems=True, items={"type": "string", "pattern": families.default().version_pattern},
        description=f"confluent-kafka versions of the producers, with each Kafka version (each set up by `acklab setup --client-version`; the locked one is {families.default().locked}); "
        "with neither these nor clients, each run's own client: a preset's, else the locked confluent-kafka",
    )


def explore_params(budget_minutes: float) -> dict[str, Param]:
    """The exploration DAG's params: its budget and seed, and the space's clients, Kafka versions,
    catalog profiles and faults (`acklab.plan.explore.ExploreSpace`)."""
    from acklab.plan.explore import MAX_BUDGET_MINUTES, explorable_faults

    faults = explorable_faults()
    return {
        "budget_minutes": Param(budget_minutes, type="number", exclusiveMinimum=0, maximum=MAX_BUDGET_MINUTES, description="Stop starting trials after this many minutes"),
        "seed": Param(None, type=["null", "integer"], description="The seed (null: the logical date's YYYYMMDD); the same seed and space draw the same trials"),
        "topology": Param("three-brokers", type="string", enum=topology_names(), description="The cluster topology of every trial"),
        "kafka_versions": Param([], type="array", uniqueItems=True, items={"type": "string", "pattern": KAFKA_VERSION_PATTERN},
                                description="Kafka versions a trial may draw (empty: the topology's)"),
        "clients": clients_param([]),
        "client_versions": client_versions_param([]),
        "profiles": Param([], type="array", uniqueItems=True, items={"type": "string", "enum": profile_names()}, examples=profile_names(),
                          description="Catalog profiles a trial may draw and re-tune (empty: every one)"),
        "faults": Param([], type="array", uniqueItems=True, items={"type": "string", "enum": faults}, examples=faults,
                        description="Catalog faults a trial may draw (empty: every one acting on producers)"),
    }

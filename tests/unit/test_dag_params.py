"""The DAG params are RunParams' JSON schema plus the catalogs' enums: every bound stated once."""

from __future__ import annotations

import jsonschema
import pytest

from acklab.base.maven import KAFKA_VERSION_PATTERN
from acklab.cluster.topology import topology_names
from acklab.nemesis.faults import FAULT_NAMES
from acklab.orchestration.params import run_params_schema
from acklab.plan.params import RunParams
from acklab.plan.planner import make_plan
from acklab.workload.profiles import profile_names


def test_every_field_of_run_params_is_a_described_param() -> None:
    schema = run_params_schema()
    assert list(schema) == [name for name in RunParams.model_fields if name != "preset"]  # the DAGs' own preset param
    assert all(field.get("description") for field in schema.values())


def test_bounds_come_from_the_model_and_enums_from_the_catalogs() -> None:
    schema = run_params_schema()
    assert schema["kafka_version"]["pattern"] == KAFKA_VERSION_PATTERN
    assert schema["producers"]["maximum"] == RunParams.model_fields["producers"].metadata[-1].le
    assert schema["topology"]["enum"] == topology_names()
    assert schema["profiles"]["examples"] == profile_names()  # any name: custom_profiles may add some
    assert schema["faults"]["items"]["enum"] == list(FAULT_NAMES)
    assert schema["profiles"]["examples"] == profile_names() and schema["faults"]["examples"] == list(FAULT_NAMES)  # multi-selects
    assert schema["partitioner"]["type"] == ["string", "null"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("faults", ["meteor"]), ("messages", 0), ("rate", -1), ("kafka_version", "2.8.0"), ("producers", 65),
     ("schedule", [{"at_s": 1}]), ("schedule", [{"fault": "none"}]), ("backend", "k8s")],
)
def test_the_form_rejects_what_the_model_rejects(name: str, value: object) -> None:
    field = run_params_schema()[name]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, field)
    with pytest.raises(ValueError):
        make_plan({name: value})

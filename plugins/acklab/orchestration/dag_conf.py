"""A DAG run's params checked the way Airflow's trigger form and the `plan` task check them, in one
line: what `make run RUN_CONF=...` runs before `airflow dags test`, so a mistake is the first line
a user sees."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

from acklab.base.paths import PROJECT_ROOT
from acklab.base.spec import SpecError, parse_model


def dag_params(dag_id: str) -> dict[str, Any]:
    """The Params of a DAG of dags/ (its file is named after it)."""
    path = PROJECT_ROOT / "dags" / f"{dag_id}.py"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.py")))
        raise SpecError(f"unknown DAG {dag_id!r}; valid: {known}")
    spec = importlib.util.spec_from_file_location(dag_id, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: module.dag.params.get_param(name) for name in module.dag.params}


def _property_policy_first(given: dict[str, Any]) -> None:
    """The property policy's own line (what is refused and why) for the properties a trigger gives; the
    form's schema refuses the same names but names only the property (`acklab.base.property_policy`)."""
    from acklab.plan.params import RunParams
    from acklab.workload.profiles import profile_from_spec

    own = {key: given[key] for key in ("broker_config", "processor_config") if isinstance(given.get(key), dict)}
    if own:
        parse_model(RunParams, own, "params")
    profiles = given.get("custom_profiles")
    for name, spec in (profiles.items() if isinstance(profiles, dict) else ()):
        profile_from_spec(str(name), spec, "params.custom_profiles")


def check_dag_conf(dag_id: str, conf: str) -> None:
    """SpecError (one line) unless `conf` (JSON) is a valid run of `dag_id`; plans it as `plan` would."""
    from airflow.sdk.definitions.param import ParamValidationError

    from acklab.orchestration import tasks

    try:
        given = json.loads(conf or "{}")
    except json.JSONDecodeError as exc:
        raise SpecError(f"params: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(given, dict):
        raise SpecError("params: expected a JSON object of param name -> value")
    params = dag_params(dag_id)
    if unknown := sorted(set(given) - set(params)):
        raise SpecError(f"params: unknown param {unknown[0]!r}; valid: {', '.join(params)}")
    _property_policy_first(given)
    values = {}
    for name, param in params.items():
        try:
            values[name] = param.resolve(given.get(name, param.value))
        except ParamValidationError as exc:
            message = str(exc.__cause__ or exc).splitlines()[0]
            raise SpecError(f"params.{name}: {message}") from None
    if "budget_minutes" in values:  # the exploration DAG: its space is its plan
        tasks.explore_space(values, default_seed=0)
    elif "kafka_versions" in values:
        tasks.plan_versions(values, create=False)
    elif "profiles" not in values:  # the field-notes DAG: its presets are its plan
        tasks.plan_presets(values, create=False)
    else:
        tasks.plan_run(values, create=False)

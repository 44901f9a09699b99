"""Which `acklab run` options combine (`acklab.plan.requests`): each refusal is one line naming the
option, each accepted combination gives the params and version grid the CLI plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acklab.base.spec import SpecError
from acklab.plan import requests
from acklab.plan.params import RunParams, standard_matrix
from acklab.plan.presets import PRESETS, with_preset
from acklab.plan.requests import RunRequest
from acklab.workload.profiles import RAW

PRESET = sorted(PRESETS)[0]
DEFAULTS = RunParams()


def test_no_option_gives_the_default_params_on_their_own_versions() -> None:
    grid = RunRequest().grid()
    assert grid.kafka_versions == [None] and grid.clients == [None]
    assert grid.params["profiles"] == DEFAULTS.profiles and grid.params["faults"] == DEFAULTS.faults
    assert grid.params["messages"] == DEFAULTS.messages and grid.params["side_by_side"] is True
    assert grid.params["schedule"] is None and "custom_profiles" not in grid.params


def test_params_file_fixes_the_run(tmp_path: Path) -> None:
    path = tmp_path / "params.json"
    path.write_text(json.dumps({"messages": 10, "kafka_version": "4.0.0", "client": "java:3.9.1"}))
    with pytest.raises(SpecError, match=r"^--params fixes the run: --messages cannot be combined with it \(only --json and --junit\)$"):
        RunRequest(params_file=path, messages=5, given=("params_file", "messages")).grid()
    grid = RunRequest(params_file=path, given=("params_file", "as_json", "verbose")).grid()
    assert grid.params == {"messages": 10} and grid.kafka_versions == ["4.0.0"] and grid.clients == ["java:3.9.1"]


def test_params_file_must_hold_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("- 1\n")
    with pytest.raises(SpecError, match=f"^{path}: expected a mapping of run params$"):
        RunRequest(params_file=path, given=("params_file",)).grid()


def test_a_preset_fixes_the_experiment() -> None:
    with pytest.raises(SpecError) as refused:
        RunRequest(preset=PRESET, messages=5, given=("preset", "messages")).grid()
    assert str(refused.value) == (
        f"--preset {PRESET} fixes the experiment: --messages cannot be combined with it "
        "(only --kafka-version, --client, --client-version, --backend, --json and --junit)"
    )


@pytest.mark.parametrize("option", ["schedule", "standard", "profiles_file", "producer_config", "librdkafka", "fault"])
def test_a_preset_refuses_each_experiment_option(option: str) -> None:
    with pytest.raises(SpecError, match=f"--{option.replace('_', '-')} cannot be combined with it"):
        RunRequest(preset=PRESET, given=("preset", option)).grid()


def test_a_preset_takes_versions_clients_the_backend_and_output_options() -> None:
    given = ("preset", "kafka_version", "client", "client_version", "backend", "as_json", "verbose")
    grid = RunRequest(
        preset=PRESET, kafka_version=["4.0.0", "3.9.1"], client=["java:3.9.1"], client_version=["2.6.0"], backend="docker", given=given
    ).grid()
    assert grid.params == with_preset(PRESET, {"backend": "docker"})
    assert grid.kafka_versions == ["4.0.0", "3.9.1"] and grid.clients == ["java:3.9.1", "librdkafka:2.6.0"]


def test_the_first_option_given_is_named() -> None:
    with pytest.raises(SpecError, match="--topology cannot"):
        RunRequest(preset=PRESET, given=("preset", "topology", "messages")).grid()


def test_a_client_version_is_a_librdkafka_client() -> None:
    assert RunRequest(client_version=["2.6.0", "2.5.3"]).grid().clients == ["librdkafka:2.6.0", "librdkafka:2.5.3"]


def test_standard_is_the_daily_matrix_with_both_families() -> None:
    standard = standard_matrix()
    grid = RunRequest(standard=True).grid()
    assert grid.params["profiles"] == standard.profiles and grid.params["faults"] == standard.faults
    assert (grid.params["messages"], grid.params["rate"]) == (standard.messages, standard.rate)
    assert grid.params["clients"] == standard.clients and grid.params["clients_together"] == standard.clients_together
    assert (grid.params["processing"], grid.params["processing_faults"]) == (standard.processing, standard.processing_faults)
    assert grid.params["pipelines_together"] is False


def test_standard_narrowed_to_profiles_or_styles_or_faults_keeps_only_those() -> None:
    assert RunRequest(standard=True, profile=["idempotent"]).grid().params["processing"] == []
    styles = RunRequest(standard=True, processing=["eos"]).grid().params
    assert (styles["profiles"], styles["processing"], styles["processing_faults"]) == ([], ["eos"], standard_matrix().processing_faults)
    assert RunRequest(standard=True, fault=["zombie"]).grid().params["processing_faults"] is None  # the pipelines run under the given faults


def test_standard_keeps_a_given_load_profile_and_clients() -> None:
    grid = RunRequest(standard=True, messages=500, rate=100, profile=["idempotent"], client=["java"]).grid()
    assert (grid.params["messages"], grid.params["rate"], grid.params["profiles"]) == (500, 100, ["idempotent"])
    assert "clients" not in grid.params and grid.clients == ["java"]


def test_a_rate_of_zero_is_full_speed() -> None:
    assert RunRequest(rate=0).grid().params["rate"] is None


def test_one_at_a_time_is_not_side_by_side() -> None:
    assert RunRequest(one_at_a_time=True).grid().params["side_by_side"] is False


def test_a_schedule_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text("- {fault: leader-kill, at_s: 2}\n")
    assert RunRequest(schedule=path).grid().params["schedule"] == [{"fault": "leader-kill", "at_s": 2}]


def test_raw_librdkafka_properties_are_profile_custom() -> None:
    grid = RunRequest(librdkafka=["acks = all", "linger.ms=5"]).grid()
    assert grid.params["custom_profiles"] == {"custom": {RAW: {"acks": "all", "linger.ms": "5"}}}
    assert grid.params["profiles"] == ["custom"]
    assert RunRequest(librdkafka=["acks=all"], profile=["custom", "idempotent"]).grid().params["profiles"] == ["custom", "idempotent"]


@pytest.mark.parametrize("pair", ["acks", "=all"])
def test_a_raw_property_must_be_a_pair(pair: str) -> None:
    with pytest.raises(SpecError, match=r"^--librdkafka '.*': expected PROPERTY=VALUE, e.g. acks=all$"):
        RunRequest(librdkafka=[pair]).grid()


def test_a_profiles_file_runs_all_its_profiles(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("mine: {acks: all, enable_idempotence: true}\nyours: {acks: '1'}\n")
    grid = RunRequest(profiles_file=path).grid()
    assert sorted(grid.params["custom_profiles"]) == ["mine", "yours"] and grid.params["profiles"] == ["mine", "yours"]


def test_a_producer_config_is_profile_custom_on_the_properties_family(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    read: list[tuple[Path, list[str]]] = []
    monkeypatch.setattr(requests, "properties_profile", lambda path, clients: read.append((path, clients)) or {"acks": "all"})
    path = tmp_path / "producer.properties"
    grid = RunRequest(producer_config=path).grid()
    assert grid.params["custom_profiles"] == {"custom": {"java": {"acks": "all"}}} and grid.clients == ["java"]
    assert grid.params["profiles"] == ["custom"] and read == [(path, [])]
    kept = RunRequest(producer_config=path, client=["librdkafka"]).grid()
    assert kept.clients == ["librdkafka"]  # the planner refuses a Java profile on it, naming the profile


def test_a_producer_config_needs_its_client_set_up(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^--producer-config: java client 3\.0\.99 is not set up"):
        requests.properties_profile(tmp_path / "producer.properties", ["librdkafka:2.6.0", "java:3.0.99"])


def test_a_presets_file_names_the_file_of_a_preset() -> None:
    with pytest.raises(SpecError, match=r"^--presets-file names the file of --preset: give --preset NAME too"):
        RunRequest(presets_file="team.yaml", given=("presets_file",)).grid()

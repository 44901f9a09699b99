"""Producer client versions: what may be asked for, and what is needed before a run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acklab.base.maven import SetupError
from acklab.base.paths import cache_dir
from acklab.base.spec import SpecError
from acklab.plan.feasibility import check_batches
from acklab.plan.planner import make_plan
from acklab.workload import families
from acklab.workload import librdkafka as clients
from acklab.workload.profiles import get_profile


@pytest.mark.parametrize("version", ["1.9.2", "2.0.1", "2.x", "3", "latest"])
def test_versions_acklab_cannot_run_are_named_with_what_is_allowed(version: str) -> None:
    with pytest.raises(SetupError, match=f"client_version '{version}': confluent-kafka releases from 2.0.2 on"):
        clients.check_version(version)


def test_the_locked_client_runs_in_acklabs_own_interpreter() -> None:
    locked = clients.client(None)
    assert locked == clients.client(clients.LOCKED)
    assert (locked.version, locked.python) == (clients.LOCKED, sys.executable) and locked.librdkafka.startswith("2.")


def test_a_client_that_is_not_set_up_fails_the_plan_in_one_line(tmp_path, monkeypatch) -> None:
    (tmp_path / "kafka").symlink_to(cache_dir() / "kafka")  # the broker jars are there, the client is not
    monkeypatch.setenv("ACKLAB_CACHE", str(tmp_path))
    with pytest.raises(SpecError, match=r"params.client_version: client 2.1.1 is not set up: run `acklab setup --client-version 2.1.1`"):
        make_plan({"client_version": "2.1.1"})


def test_each_family_writes_its_config_in_its_own_format(tmp_path: Path) -> None:
    config = {"retries": "5", "acks": "all", "client.id": "a:b"}
    for family in families.FAMILIES.values():
        family.write_config(tmp_path / family.config_file, config)
    assert json.loads((tmp_path / "librdkafka.json").read_text()) == config
    assert (tmp_path / "producer.properties").read_text() == "acks=all\nclient.id=a\\:b\nretries=5\n"  # sorted, escaped


def test_a_librdkafka_config_file_is_read_without_the_users_cluster(tmp_path: Path) -> None:
    family = families.with_config_file("librdkafka.json")
    path = tmp_path / "librdkafka.json"
    path.write_text(json.dumps({"bootstrap.servers": "prod:9092", "acks": 1}))
    assert family.read_config(family.client(None), path) == {"acks": "1"}
    path.write_text("{}")
    with pytest.raises(SpecError, match="no properties in it"):
        family.read_config(family.client(None), path)


def test_only_a_family_that_does_not_split_a_refused_batch_bounds_its_batches() -> None:
    librdkafka, java = families.FAMILIES["librdkafka"], families.FAMILIES["java"]
    assert librdkafka.unsplit_batch_bytes({}) == 1_000_000
    assert librdkafka.unsplit_batch_bytes({"batch.size": 5000, "message.max.bytes": "9000"}) == 5000
    assert java.unsplit_batch_bytes({"batch.size": 10_000_000}) is None
    small = {"message.max.bytes": "4096"}
    profile = get_profile("idempotent")
    with pytest.raises(SpecError, match="below the batches librdkafka builds for profile idempotent"):
        check_batches(small, "librdkafka", profile, {})
    check_batches(small, "java", profile, {"batch.size": 10_000_000})


def test_each_family_names_the_errors_its_send_log_records() -> None:
    librdkafka, java = families.FAMILIES["librdkafka"], families.FAMILIES["java"]
    assert librdkafka.error_names(["_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS"]) == {"_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS"}
    assert java.error_names(["_MSG_TIMED_OUT"]) == {"TimeoutException"}


def test_a_family_is_found_by_its_name_its_config_file_and_its_setup_option() -> None:
    assert families.named(None) is families.named("") is families.default()
    assert families.named("java").config_file == "producer.properties"
    assert {f.version_option for f in families.FAMILIES.values()} == {"client_version", "java_client_version"}
    with pytest.raises(SpecError, match="expected one of librdkafka, java"):
        families.named("kafka-python")
    with pytest.raises(SpecError, match="no client family reads client.conf"):
        families.with_config_file("client.conf")

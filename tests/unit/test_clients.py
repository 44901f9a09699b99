"""Producer client versions: what may be asked for, and what is needed before a run."""

from __future__ import annotations

import sys

import pytest

from acklab.base.maven import SetupError
from acklab.base.paths import cache_dir
from acklab.base.spec import SpecError
from acklab.plan.planner import make_plan
from acklab.workload import librdkafka as clients


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

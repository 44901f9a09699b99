"""Test-wide isolation: each test session gets its own run store, so reapers never see real runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def isolated_run_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    os.environ["ACKLAB_RUNS"] = str(runs)
    return runs

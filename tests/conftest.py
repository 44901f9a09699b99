"""Test-wide isolation (each session gets its own run store, so reapers never see real runs) and a crash
record: while the session runs, `test-artifacts/pytest-crash.txt` names the test in progress and receives
faulthandler's dump should the interpreter die (e.g. SIGABRT in a C extension); the file is removed when
the session ends normally, so its presence after pytest exits means the session crashed."""

from __future__ import annotations

import faulthandler
import os
from pathlib import Path
from typing import IO

import pytest

from acklab.base.paths import PROJECT_ROOT

CRASH_RECORD = Path(os.environ.get("ACKLAB_TEST_ARTIFACTS", PROJECT_ROOT / "test-artifacts")) / "pytest-crash.txt"
_record: IO[str] | None = None


@pytest.fixture(scope="session", autouse=True)
def isolated_run_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    os.environ["ACKLAB_RUNS"] = str(runs)
    return runs


def pytest_configure(config: pytest.Config) -> None:
    global _record
    if hasattr(config, "workerinput"):
        return
    CRASH_RECORD.parent.mkdir(parents=True, exist_ok=True)
    _record = CRASH_RECORD.open("a")
    faulthandler.enable(file=_record, all_threads=True)


def pytest_runtest_logstart(nodeid: str) -> None:
    if _record is not None:
        os.ftruncate(_record.fileno(), 0)
        _record.write(f"the session died during {nodeid}\n")
        _record.flush()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _record
    if _record is not None:
        faulthandler.disable()
        _record.close()
        _record = None
        CRASH_RECORD.unlink(missing_ok=True)

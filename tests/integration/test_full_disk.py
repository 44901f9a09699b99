"""A run store on a full disk (a small tmpfs as ACKLAB_RUNS): as docs/reference.md says of a run that
fails, one line naming the error and where its traceback went, exit code 1 and no verdict (never
pass, fail or incomplete), no traceback on the terminal, and nothing left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from acklab.orchestration.cli.common import ExitCode

pytestmark = pytest.mark.integration
SIZE = "40m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "acklab-test", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run([str(Path(sys.executable).parent / "acklab"), "reap", "--all"], env={**os.environ, "ACKLAB_RUNS": str(mount / "runs")},
                       capture_output=True, timeout=120)
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_full_disk_gives_a_clear_error_and_no_pass(small_disk: Path) -> None:
    runs = small_disk / "runs"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "acklab"), "run", "--topology", "single-broker", "--profile", "leader-ack",
         "--fault", "none", "--messages", "120000", "--message-bytes", "1000", "--rate", "0"],
        env={**os.environ, "ACKLAB_RUNS": str(runs)}, capture_output=True, text=True, timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == ExitCode.ERROR, output[-3000:]  # a run that failed, no verdict: neither fail (1) nor the user's mistake (2)
    assert "Traceback" not in output, output[-3000:]
    assert "status:" not in result.stdout, result.stdout[-3000:]  # no verdict at all: neither pass nor fail nor incomplete
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]  # the progress display may follow it
    assert len(errors) == 1, result.stderr[-3000:]
    error = re.fullmatch(r"error: the run failed, no verdict \((\w+): .*\); traceback: (\S+)", errors[0])
    assert error, errors[0]
    assert f"{error[1]}: " in Path(error[2]).read_text(), "the traceback file does not hold the error it names"
    assert not list(runs.glob("*/result.json")), "a run on a full disk wrote a verdict"
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if any(str(small_disk) in part for part in (p.info["cmdline"] or []))]
    assert left == [], f"processes left on the full disk: {left}"

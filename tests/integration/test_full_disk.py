"""A run store on a full disk (a small tmpfs as ACKLAB_RUNS): a clear error or a failed verdict,
never a pass and never a traceback, and nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

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
    assert result.returncode != 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "status: pass" not in result.stdout
    assert "error: the run failed, no verdict" in result.stderr or "status: fail" in result.stdout or "status: incomplete" in result.stdout
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if any(str(small_disk) in part for part in (p.info["cmdline"] or []))]
    assert left == [], f"processes left on the full disk: {left}"

"""Where acklab keeps its caches, runs and project files (overridable by environment)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(os.environ.get("ACKLAB_HOME", Path(__file__).resolve().parents[3]))


def cache_dir() -> Path:
    """Jar cache filled by `acklab setup` (Maven downloads are copied here)."""
    return Path(os.environ.get("ACKLAB_CACHE", PROJECT_ROOT / ".cache"))


def runs_dir() -> Path:
    """Run store: one directory per run with its cluster state and evidence."""
    return Path(os.environ.get("ACKLAB_RUNS", PROJECT_ROOT / "runs"))


def work_dir() -> Path:
    """Where a share of a run (`acklab.orchestration.shares`) keeps its cluster and evidence while it
    runs: the run store unless ACKLAB_WORK says otherwise. A folder of this host: where workers
    share the run store (an NFS path), ACKLAB_WORK names a local one, so that only this host's
    reaper judges the clusters in it (by pids of this host)."""
    return Path(os.environ.get("ACKLAB_WORK") or runs_dir())


def clusters_dir() -> Path:
    """Topology specs (`clusters/*.yaml`)."""
    return PROJECT_ROOT / "clusters"


def expectations_dir() -> Path:
    """The Great Expectations project root."""
    return Path(os.environ.get("ACKLAB_EXPECTATIONS", PROJECT_ROOT / "expectations"))


def spark_job(name: str = "delivery_matrix.py") -> Path:
    """A PySpark job file under `spark/`."""
    return PROJECT_ROOT / "spark" / name

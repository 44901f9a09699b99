"""The backends registry and the reaper: which `NodeRunner` runs a cluster's nodes, and how a
cluster (any backend's) is torn down, also after its owner died."""

from __future__ import annotations

import importlib
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from acklab.base.paths import work_dir
from acklab.cluster import links
from acklab.cluster.runner import NodeRunner
from acklab.cluster.state import STATE_FILE, ClusterState, kill_and_wait

Backend = Literal["local", "docker"]
# name -> "module:class"; imported on use, so the Docker SDK loads only for Docker clusters.
RUNNERS: dict[str, str] = {"local": "acklab.cluster.local:LocalRunner", "docker": "acklab.cluster.docker:DockerRunner"}


def runner_class(backend: str) -> type[NodeRunner]:
    module, _, name = RUNNERS[backend].partition(":")
    return getattr(importlib.import_module(module), name)


def runner_for(state: ClusterState, root: Path) -> NodeRunner:
    """The runner of a provisioned cluster, on the backend its state records."""
    return runner_class(state.backend)(state, root)  # type: ignore[call-arg]


def teardown(state: ClusterState, root: Path) -> None:
    """Kill every process we started (nodes, proxy), remove the backend's resources, the link
    control's rules and cgroups and the data dirs (node logs stay as evidence), mark the state torn
    down; idempotent."""
    if state.status == "torn-down":
        return
    runner_for(state, root).remove(state)
    if state.links is not None:
        links.remove(state.links, root)
    with ThreadPoolExecutor(max_workers=len(state.nodes)) as pool:  # each node's deletes overlap the others'
        list(pool.map(lambda node: shutil.rmtree(node.data_dir, ignore_errors=True), state.nodes))
    kill_and_wait(state.proxy)
    state.status = "torn-down"
    state.save(root)


def _states(runs_root: Path) -> list[tuple[Path, ClusterState]]:
    """Every cluster state in a folder of `runs_root`, and of the shares' work folder (`work_dir()`) when it is elsewhere."""
    found = []
    roots = dict.fromkeys([runs_root.resolve(), work_dir().resolve()])
    for state_file in sorted(f for root in roots for f in root.glob(f"*/cluster/{STATE_FILE}")):
        try:
            found.append((state_file.parent, ClusterState.load(state_file.parent)))
        except (ValueError, OSError):
            continue
    return found


def reap_orphans(runs_root: Path) -> list[Path]:
    """Tear down every orphaned cluster under `runs_root` (its owner is gone or its lease ran out)."""
    reaped = []
    for root, state in _states(runs_root):
        if state.is_orphaned(root):
            teardown(state, root)
            reaped.append(root)
    return reaped


def reap_all(runs_root: Path) -> list[Path]:
    """Tear down every cluster still marked running under `runs_root` (explicit cleanup)."""
    reaped = []
    for root, state in _states(runs_root):
        if state.status == "running":
            teardown(state, root)
            reaped.append(root)
    return reaped

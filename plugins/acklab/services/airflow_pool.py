"""The Airflow pools of the delivery DAGs, stated once. Cheap to import (no Airflow).

- `NAME` (one slot): the scenario groups of a run share its cluster and run one at a time.
- `SHARES`: each task of it holds a cluster of its own for its whole life (a share of a run, a
  version pair); one slot per worker that can hold one, so a host never runs two such clusters'
  loads at once. Its slots are `ACKLAB_SHARE_SLOTS` (default 1) where the pools are created;
  `acklab airflow up --celery-workers N` makes them N."""

from __future__ import annotations

import os

NAME = "acklab_cluster"
SLOTS = 1
DESCRIPTION = "acklab: scenario groups sharing a cluster run one at a time"
SHARES = "acklab_shares"
SHARES_DESCRIPTION = "acklab: tasks holding a cluster of their own (shares, version pairs), one per worker"


def share_slots(default: int | None = None) -> int:
    """The SHARES pool's slots: `default` if given, else ACKLAB_SHARE_SLOTS, else 1."""
    slots = default if default is not None else int(os.environ.get("ACKLAB_SHARE_SLOTS") or 1)
    if slots < 1:
        raise ValueError(f"ACKLAB_SHARE_SLOTS: {slots}; allowed: 1 or more (one per worker that can hold a cluster)")
    return slots


def set_commands(share_slots_: int | None = None) -> list[tuple[str, ...]]:
    """The `airflow` CLI's arguments that create (or update) each pool."""
    return [
        ("pools", "set", NAME, str(SLOTS), DESCRIPTION),
        ("pools", "set", SHARES, str(share_slots(share_slots_)), SHARES_DESCRIPTION),
    ]

"""The Airflow pool of the delivery DAGs, stated once: one slot, since the scenario groups of a run
share its cluster and must run one at a time. Cheap to import (no Airflow)."""

from __future__ import annotations

NAME = "acklab_cluster"
SLOTS = 1
DESCRIPTION = "acklab: scenario groups sharing a cluster run one at a time"
SET_ARGS = ("pools", "set", NAME, str(SLOTS), DESCRIPTION)
"""The `airflow` CLI's arguments that create (or update) the pool."""

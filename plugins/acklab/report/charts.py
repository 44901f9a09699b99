"""PNG charts of a run: the verdict heatmap (profiles x faults) and per-scenario timelines."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow.parquet as pq

from acklab.store.runs import FaultRecord
from acklab.workload import families

COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "incomplete": "#f9a825", None: "#e0e0e0"}


def heatmap(rows: list[dict], statuses: dict[str, str], path: Path) -> Path:
    """Profiles (one line per profile and client: the scenario name before its fault) x faults, each cell
    coloured by verdict with its key counts."""

    def line(row: dict) -> str:
        return str(row["scenario"]).rsplit("__", 1)[0]

    profiles = sorted({line(r) for r in rows})
    faults = sorted({r["fault"] for r in rows})
    cells = {(line(r), r["fault"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(1.6 + 1.9 * len(faults), 0.9 + 0.85 * len(profiles)))
    for y, profile in enumerate(profiles):
        for x, fault in enumerate(faults):
            row = cells.get((profile, fault))
            status = statuses.get(row["scenario"]) if row else None
            ax.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=COLOURS[status], edgecolor="white", linewidth=2))
            if row:
                text = f"{status}\nlost {row['lost']} dup {row['duplicates']}\nfailed {row['failed']}"
                ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=7, color="white" if status != "incomplete" else "black")
    ax.set_xlim(0, len(faults))
    ax.set_ylim(len(profiles), 0)
    ax.set_xticks(np.arange(len(faults)) + 0.5, faults, rotation=30, ha="right")
    ax.set_yticks(np.arange(len(profiles)) + 0.5, profiles)
    clients = ", ".join(sorted({families.row_label(r) for r in rows}))
    ax.set_title(f"delivery matrix: verdict per profile x fault ({clients})" if clients else "delivery matrix: verdict per profile x fault")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def timeline(send_log: Path, load_started: float, fault_timeline: list[FaultRecord], title: str, path: Path) -> Path:
    """Acked/failed per second and ack latency (p50, max) per second, fault windows shaded."""
    table = pq.read_table(send_log, columns=["send_ts", "ack_ts", "state"])
    send = table["send_ts"].to_numpy(zero_copy_only=False)
    ack = table["ack_ts"].to_numpy(zero_copy_only=False)
    state = np.asarray(table["state"].to_pylist())
    reported = ~np.isnan(ack)
    t_ack = ack[reported] - load_started
    latency_ms = (ack[reported] - send[reported]) * 1000
    acked = state[reported] == "acked"
    end = max(1.0, float(np.nanmax(t_ack)) if t_ack.size else 1.0)
    bins = np.arange(0, np.ceil(end) + 1)
    fig, (rate_ax, lat_ax) = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True)
    rate_ax.hist([t_ack[acked], t_ack[~acked]], bins=bins, stacked=True, color=["#1565c0", "#c62828"], label=["acked", "failed"])
    rate_ax.set_ylabel("reports / s")
    rate_ax.legend(loc="upper right", fontsize=8)
    index = np.digitize(t_ack, bins) - 1
    p50 = [np.median(latency_ms[index == i]) if np.any(index == i) else np.nan for i in range(len(bins) - 1)]
    peak = [latency_ms[index == i].max() if np.any(index == i) else np.nan for i in range(len(bins) - 1)]
    lat_ax.plot(bins[:-1] + 0.5, p50, label="p50", color="#1565c0")
    lat_ax.plot(bins[:-1] + 0.5, peak, label="max", color="#6a1b9a", alpha=0.7)
    lat_ax.set_yscale("symlog", linthresh=10)
    lat_ax.set_ylabel("ack latency ms")
    lat_ax.set_xlabel("seconds since load start")
    lat_ax.legend(loc="upper right", fontsize=8)
    for event in fault_timeline:
        if event.started is None:
            continue
        start = event.started - load_started
        stop = (event.ended or event.started) - load_started
        for ax in (rate_ax, lat_ax):
            ax.axvspan(start, stop, color="#ffab00", alpha=0.25, label=None)
    rate_ax.set_title(title + "  (shaded: fault window)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

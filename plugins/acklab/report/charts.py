"""PNG charts: a run's verdict heatmap (faults x profiles) and per-scenario timelines; the verdicts per run of the history."""

from __future__ import annotations

import functools
import io
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow.parquet as pq
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle, StepPatch

from acklab.store.runs import FaultRecord
from acklab.workload import families

COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "incomplete": "#f9a825", None: "#e0e0e0"}


CELL_IN = (1.45, 0.52)  # a cell's width and height: three lines of 8-point text
LABELS_IN = (2.3, 1.2)  # the faults' labels on the left, title and profiles' labels above a panel
TITLE_IN = 5.5  # a panel is never narrower than its title


def heatmap(rows: list[dict], statuses: dict[str, str], path: Path) -> Path:
    """One panel per client (stacked): faults down, profiles across, each cell coloured by verdict
    with its key counts; at 110 dpi a panel of 7 profiles is about 1,400 px wide, whatever the number
    of faults, so the cells stay legible on a laptop screen."""

    def line(row: dict) -> str:
        return str(row["scenario"]).rsplit("__", 1)[0]

    clients = sorted({families.row_label(r) for r in rows}) or [""]
    faults = sorted({r["fault"] for r in rows})
    panels = {client: [r for r in rows if families.row_label(r) == client] for client in clients}
    widest = max(len({line(r) for r in panel}) for panel in panels.values()) or 1
    fig, axes = plt.subplots(
        len(clients), 1, squeeze=False,
        figsize=(LABELS_IN[0] + max(CELL_IN[0] * widest, TITLE_IN), len(clients) * (LABELS_IN[1] + CELL_IN[1] * len(faults))),
    )
    for ax, (client, panel) in zip(axes[:, 0], panels.items(), strict=True):
        profiles = sorted({line(r) for r in panel})
        cells = {(line(r), r["fault"]): r for r in panel}
        for x, profile in enumerate(profiles):
            for y, fault in enumerate(faults):
                row = cells.get((profile, fault))
                status = statuses.get(row["scenario"]) if row else None
                ax.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=COLOURS[status], edgecolor="white", linewidth=2))
                if row:
                    text = f"{status}\nlost {row['lost']} dup {row['duplicates']}\nfailed {row['failed']}"
                    ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=8, color="white" if status != "incomplete" else "black")
        ax.set_xlim(0, widest)
        ax.set_ylim(len(faults), 0)
        ax.xaxis.tick_top()
        ax.set_xticks(np.arange(len(profiles)) + 0.5, profiles, rotation=20, ha="left", fontsize=9)
        ax.set_yticks(np.arange(len(faults)) + 0.5, faults, fontsize=9)
        ax.set_title(f"verdict per fault x profile{f' ({client})' if client else ''}", loc="left", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@dataclass
class _TimelineFigure:
    """The figure every timeline of a process is drawn on: its axes, ticks and legends are made
    once (making them was a third of each timeline's time), each chart sets the data."""

    fig: Figure
    rate_ax: Axes
    lat_ax: Axes
    acked: StepPatch
    failed: StepPatch
    p50: Line2D
    peak: Line2D
    spans: list[Rectangle] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@functools.cache
def _timeline_figure() -> _TimelineFigure:
    fig, (rate_ax, lat_ax) = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True)
    # Stacked steps, one polygon each, not a bar patch per second.
    acked = rate_ax.stairs([0.0], [0.0, 1.0], fill=True, color="#1565c0", label="acked")
    failed = rate_ax.stairs([0.0], [0.0, 1.0], baseline=[0.0], fill=True, color="#c62828", label="failed")
    rate_ax.set_ylabel("reports / s")
    rate_ax.legend(loc="upper right", fontsize=8)
    (p50,) = lat_ax.plot([], [], label="p50", color="#1565c0")
    (peak,) = lat_ax.plot([], [], label="max", color="#6a1b9a", alpha=0.7)
    lat_ax.set_yscale("symlog", linthresh=10)
    lat_ax.set_ylabel("ack latency ms")
    lat_ax.set_xlabel("seconds since load start")
    lat_ax.legend(loc="upper right", fontsize=8)
    # Fixed margins (tight_layout took a third of a timeline's time): room for the latency axis's
    # 10^n labels, the x label and the title.
    fig.subplots_adjust(left=0.085, right=0.985, bottom=0.11, top=0.93, hspace=0.08)
    return _TimelineFigure(fig, rate_ax, lat_ax, acked, failed, p50, peak)


def timeline(send_log: Path, load_started: float, fault_timeline: list[FaultRecord], title: str, path: Path) -> Path:
    """Acked/failed per second and ack latency (p50, max) per second, fault windows shaded; the same
    pixels as on a figure of its own."""
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
    acked_per_s, _ = np.histogram(t_ack[acked], bins=bins)
    failed_per_s, _ = np.histogram(t_ack[~acked], bins=bins)
    index = np.digitize(t_ack, bins) - 1
    p50 = [np.median(latency_ms[index == i]) if np.any(index == i) else np.nan for i in range(len(bins) - 1)]
    peak = [latency_ms[index == i].max() if np.any(index == i) else np.nan for i in range(len(bins) - 1)]
    chart = _timeline_figure()
    with chart.lock:
        chart.acked.set_data(acked_per_s, bins)
        chart.failed.set_data(acked_per_s + failed_per_s, bins, acked_per_s)
        chart.p50.set_data(bins[:-1] + 0.5, p50)
        chart.peak.set_data(bins[:-1] + 0.5, peak)
        for span in chart.spans:
            span.remove()
        chart.spans = []
        for event in fault_timeline:
            if event.started is None:
                continue
            start = event.started - load_started
            stop = (event.ended or event.started) - load_started
            chart.spans += [ax.axvspan(start, stop, color="#ffab00", alpha=0.25, label=None) for ax in (chart.rate_ax, chart.lat_ax)]
        for ax in (chart.rate_ax, chart.lat_ax):
            ax.relim()
            ax.autoscale_view()
        chart.rate_ax.set_title(title + "  (shaded: fault window)", fontsize=10, y=1.0)  # placed, not fitted to tick labels
        chart.fig.savefig(path, dpi=100)
    return path


def verdict_history(runs: list[tuple[str, time.struct_time, list[str]]]) -> bytes:
    """PNG bytes: one stacked bar per run (oldest left) of its scenarios passed, failed, incomplete."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(runs) + 2), 3.2))
    bottom = np.zeros(len(runs))
    for status in ("pass", "fail", "incomplete"):
        counts = np.array([statuses.count(status) for _, _, statuses in runs], dtype=float)
        ax.bar(np.arange(len(runs)), counts, bottom=bottom, color=COLOURS[status], label=status)
        bottom += counts
    ax.set_xticks(np.arange(len(runs)), [time.strftime("%m-%d %H:%M", finished) for _, finished, _ in runs], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("scenarios")
    ax.set_title("verdicts per run (oldest left)", loc="left", fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1), fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()

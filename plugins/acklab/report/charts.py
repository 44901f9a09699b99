"""PNG charts: a run's verdict heatmap (faults x profiles) and per-scenario timelines; the verdicts per run of the history."""

from __future__ import annotations

import functools
import io
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle, StepPatch
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from PIL import Image

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
                    text = _cell_text(status, row)
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


def _cell_text(status: str | None, row: dict) -> str:
    """A heatmap cell's lines: its verdict and key counts (a pipeline's per processed input)."""
    if row.get("processed_lost") is not None:
        return f"{status}\np.lost {row['processed_lost']} p.dup {row['processed_duplicated']}\nunproc. {row.get('unprocessed', 0)}"
    return f"{status}\nlost {row['lost']} dup {row['duplicates']}\nfailed {row['failed']}"


# A chart's axes end at a coarse ceiling of its data, so that charts of similar loads share the
# pixels of each axes' frame (ticks, labels), drawn once per process and ceiling (`_TimelineFigure`).
RATE_CEILINGS = (1.0, 2.0, 5.0)  # times a power of ten: the reports-per-second axis's top
SECONDS_STEP = 5.0  # the time axis ends at the next multiple of this
LATENCY_LINEAR_MS = 10  # the latency axis is linear below this, logarithmic above
FAULT_WINDOW, FAULT_ALPHA = "#ffab00", 0.25


def _ceiling(value: float) -> float:
    """The least of `RATE_CEILINGS` times a power of ten that is at least `value` (> 0)."""
    scale = 10.0 ** np.floor(np.log10(value))
    return float(next(step * scale for step in (*RATE_CEILINGS, 10.0) if step * scale >= value * (1 - 1e-12)))


@dataclass
class _TimelineFigure:
    """The figure every timeline of a process is drawn on. It is three bands, each kept as pixels:
    the top (legend; the title is drawn on it), the rates' axes (per time and rate ceiling) and the
    latencies' axes (per time and latency ceiling), each rendered once. A chart restores its bands
    and draws only its data, fault windows and title (the artists marked animated, which rendering
    the bands leaves out), so it is the same image whichever charts the process drew before."""

    fig: Figure
    rate_ax: Axes
    lat_ax: Axes
    acked: StepPatch
    failed: StepPatch
    p50: Line2D
    peak: Line2D
    title: Text
    windows: list[tuple[Rectangle, Rectangle]] = field(default_factory=list)
    bands: dict[tuple[str, float, float], Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def restore(self, seconds: float, rate: float, latency: float) -> None:
        """Set the axes' upper limits and restore the three bands for them (rendering those not kept yet)."""
        # The rate axis's top tick label reaches into the top band.
        keys = {"top": ("top", 0.0, rate), "rate": ("rate", seconds, rate), "latency": ("latency", seconds, latency)}
        self.rate_ax.set_xlim(0, seconds)  # the data are drawn in these limits, whichever bands were kept
        self.rate_ax.set_ylim(0, rate)
        self.lat_ax.set_ylim(0, latency)
        if any(key not in self.bands for key in keys.values()):
            self.fig.canvas.draw()
            for name, key in keys.items():
                self.bands.setdefault(key, self.fig.canvas.copy_from_bbox(self._band(name)))
        for key in keys.values():
            self.fig.canvas.restore_region(self.bands[key])

    def _band(self, name: str) -> Bbox:
        """The band's pixels: across the figure, from the axes' gap to the top or to the bottom."""
        width, height = self.fig.canvas.get_width_height()
        gap = (self.rate_ax.get_position().y0 + self.lat_ax.get_position().y1) / 2 * height
        top = self.rate_ax.get_position().y1 * height + 1
        bottom, upper = {"top": (top, height), "rate": (gap, top), "latency": (0, gap)}[name]
        return Bbox.from_extents(0, int(bottom), width, int(upper))

    def window_pairs(self, count: int) -> list[tuple[Rectangle, Rectangle]]:
        """`count` shaded spans (one on each axes per fault window), made when first needed."""
        while len(self.windows) < count:
            self.windows.append(
                tuple(  # type: ignore[arg-type]
                    ax.add_patch(Rectangle((0, 0), 0, 1, transform=ax.get_xaxis_transform(), color=FAULT_WINDOW, alpha=FAULT_ALPHA, animated=True))
                    for ax in (self.rate_ax, self.lat_ax)
                )
            )
        return self.windows[:count]


@functools.cache
def _timeline_figure() -> _TimelineFigure:
    fig, (rate_ax, lat_ax) = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True, dpi=100)
    # Stacked steps, one polygon each, not a bar patch per second.
    acked = rate_ax.stairs([0.0], [0.0, 1.0], fill=True, color="#1565c0", label="acked", animated=True)
    failed = rate_ax.stairs([0.0], [0.0, 1.0], baseline=[0.0], fill=True, color="#c62828", label="failed", animated=True)
    rate_ax.set_ylabel("reports / s")
    (p50,) = lat_ax.plot([], [], label="ack latency p50", color="#1565c0", animated=True)
    (peak,) = lat_ax.plot([], [], label="ack latency max", color="#6a1b9a", alpha=0.7, animated=True)
    lat_ax.set_yscale("symlog", linthresh=LATENCY_LINEAR_MS)
    lat_ax.set_ylabel("ack latency ms")
    lat_ax.set_xlabel("seconds since load start")
    window = Rectangle((0, 0), 1, 1, color=FAULT_WINDOW, alpha=FAULT_ALPHA, label="fault window")
    # Above the axes, beside the title: no data is ever drawn over it.
    fig.legend(handles=[acked, failed, p50, peak, window], loc="upper right", bbox_to_anchor=(0.985, 1.0), ncol=5, fontsize=8, frameon=False)
    title = fig.text(0.085, 0.985, "", fontsize=10, va="top", animated=True)
    # Fixed margins (tight_layout took a third of a timeline's time): room for the latency axis's
    # 10^n labels, the x label, the title and the legend.
    fig.subplots_adjust(left=0.085, right=0.985, bottom=0.11, top=0.92, hspace=0.08)
    return _TimelineFigure(fig, rate_ax, lat_ax, acked, failed, p50, peak, title)


def timeline(send_log: Path, load_started: float, fault_timeline: list[FaultRecord], title: str, path: Path) -> Path:
    """Acked/failed per second and ack latency (p50, max) per second, fault windows shaded; the same
    pixels whichever charts the process drew before."""
    table = pq.read_table(send_log, columns=["send_ts", "ack_ts", "state"])
    send = table["send_ts"].to_numpy(zero_copy_only=False)
    ack = table["ack_ts"].to_numpy(zero_copy_only=False)
    reported = ~np.isnan(ack)
    acked = pc.equal(table["state"], "acked").to_numpy(zero_copy_only=False)[reported]
    t_ack = ack[reported] - load_started
    latency_ms = (ack[reported] - send[reported]) * 1000
    end = max(1.0, float(t_ack.max()) if t_ack.size else 1.0)
    bins = np.arange(0, np.ceil(end) + 1)
    acked_per_s, _ = np.histogram(t_ack[acked], bins=bins)
    failed_per_s, _ = np.histogram(t_ack[~acked], bins=bins)
    p50, peak = _per_second(np.clip(np.digitize(t_ack, bins) - 1, 0, len(bins) - 2), latency_ms, len(bins) - 1)
    slowest = max(float(LATENCY_LINEAR_MS), float(np.nanmax(peak)) if latency_ms.size else 0.0)
    windows = [
        (event.started - load_started, (event.ended or event.started) - load_started) for event in fault_timeline if event.started is not None
    ]
    chart = _timeline_figure()
    with chart.lock:
        chart.restore(
            SECONDS_STEP * np.ceil(max([end, *(stop for _, stop in windows)]) / SECONDS_STEP),
            _ceiling(max(1.0, float((acked_per_s + failed_per_s).max()) * 1.05)),
            10.0 ** np.ceil(np.log10(slowest * 1.05)),
        )
        chart.acked.set_data(acked_per_s, bins)
        chart.failed.set_data(acked_per_s + failed_per_s, bins, acked_per_s)
        chart.p50.set_data(bins[:-1] + 0.5, p50)
        chart.peak.set_data(bins[:-1] + 0.5, peak)
        chart.title.set_text(title)
        spans = []
        for (start, stop), pair in zip(windows, chart.window_pairs(len(windows)), strict=True):
            for span in pair:
                span.set_x(start)
                span.set_width(stop - start)
                spans.append(span)
        for artist in (chart.acked, chart.failed, *spans, chart.p50, chart.peak):
            artist.axes.draw_artist(artist)
        for ax in (chart.rate_ax, chart.lat_ax):  # the data may cover an edge of the frame
            for spine in ax.spines.values():
                ax.draw_artist(spine)
        chart.fig.draw_artist(chart.title)
        canvas = chart.fig.canvas
        Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(path, format="png")
    return path


def _per_second(second: np.ndarray, latency_ms: np.ndarray, seconds: int) -> tuple[np.ndarray, np.ndarray]:
    """The median and the maximum of `latency_ms` in each of `seconds` seconds (`second`: each
    value's); NaN for a second without values."""
    order = np.lexsort((latency_ms, second))
    second, latency_ms = second[order], latency_ms[order]
    first = np.searchsorted(second, np.arange(seconds), side="left")
    last = np.searchsorted(second, np.arange(seconds), side="right")
    p50, peak = np.full(seconds, np.nan), np.full(seconds, np.nan)
    filled = last > first
    lo, hi = first[filled], last[filled] - 1
    p50[filled] = (latency_ms[lo + (hi - lo) // 2] + latency_ms[lo + (hi - lo + 1) // 2]) / 2
    peak[filled] = latency_ms[hi]
    return p50, peak


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

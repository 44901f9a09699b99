"""Timelines are drawn on one figure per process: each chart is the same image as on a figure of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from acklab.report import charts
from acklab.store.runs import FaultRecord

START = 1_800_000_000.0


def send_log(path: Path, seconds: float, failed_every: int, slow_from: float) -> Path:
    """Records sent over `seconds`, every `failed_every`-th failed, acks 100x slower from `slow_from`."""
    send = START + np.linspace(0, seconds, 4000)
    latency = np.where(send - START >= slow_from, 0.5, 0.005)
    state = ["failed" if i % failed_every == 0 else "acked" for i in range(send.size)]
    pq.write_table(pa.table({"send_ts": send, "ack_ts": send + latency, "state": state}), path)
    return path


def pixels(png: Path) -> np.ndarray:
    return np.asarray(Image.open(png))


def test_a_timeline_drawn_after_others_is_the_image_it_is_alone(tmp_path: Path) -> None:
    fault = FaultRecord(fault="leader-kill", started=START + 3, ended=START + 9)
    cut = FaultRecord(fault="split", started=START + 1, ended=START + 2)
    busy = send_log(tmp_path / "busy.parquet", 30, 7, 12)
    calm = send_log(tmp_path / "calm.parquet", 8, 10**9, 100)
    charts._timeline_figure.cache_clear()
    alone = pixels(charts.timeline(calm, START, [], "calm", tmp_path / "alone.png"))
    charts.timeline(busy, START, [fault, cut], "busy", tmp_path / "busy.png")
    after = pixels(charts.timeline(calm, START, [], "calm", tmp_path / "after.png"))
    assert alone.shape == after.shape and (alone == after).all()  # no span, limit or title of the busy chart left
    assert not (pixels(tmp_path / "busy.png") == after).all()

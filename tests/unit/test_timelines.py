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


def test_timelines_drawn_in_the_background_are_the_images_drawn_in_process_in_manifest_order(tmp_path: Path) -> None:
    from acklab.report.html import POOL_FROM, TimelineDrawing
    from acklab.store.runs import Manifest, RunDir, ScenarioEntry

    run = RunDir(tmp_path / "20260101T000000-abcdef")
    run.root.mkdir()
    entries = []
    for i in range(POOL_FROM):  # enough for a process per core
        folder = run.scenario(f"s{i:02d}").root
        folder.mkdir(parents=True)
        log = send_log(folder / "send_log.parquet", 5 + i, 3 + i, 2 + i / 4)
        windows = [FaultRecord(fault="leader-kill", started=START + 1 + i / 8, ended=START + 3)] if i % 2 else []
        entries.append(ScenarioEntry(scenario=f"s{i:02d}", send_log=run.relative(log), load_started=START, fault_timeline=windows))
    run.write_manifest(Manifest(run_id=run.run_id, bootstrap_servers="", topology={}, scenarios=entries))
    with TimelineDrawing(run) as drawing:
        assert drawing._pool is not None  # the pool path is the one under test
        drawn = drawing.wait()
    assert [d["scenario"] for d in drawn] == [e.scenario for e in entries]
    for entry, item in zip(entries, drawn, strict=True):
        alone = charts.timeline(run.root / entry.send_log, START, entry.fault_timeline, entry.scenario, tmp_path / "alone.png")
        assert (pixels(run.report.root / item["png"]) == pixels(alone)).all(), entry.scenario


def test_per_second_median_and_maximum_are_numpys_per_second() -> None:
    rng = np.random.default_rng(7)
    second = rng.integers(0, 6, 500)
    second[second == 3] = 4  # a second without values
    latency = rng.exponential(50, 500)
    p50, peak = charts._per_second(second, latency, 7)
    for s in range(7):
        values = latency[second == s]
        expected = (np.median(values), values.max()) if values.size else (np.nan, np.nan)
        np.testing.assert_equal((p50[s], peak[s]), expected)


def test_axes_end_at_coarse_ceilings() -> None:
    assert [charts._ceiling(v) for v in (0.7, 1.0, 1.01, 2100, 5000, 5001, 40000)] == [1.0, 1.0, 2.0, 5000.0, 5000.0, 10000.0, 50000.0]

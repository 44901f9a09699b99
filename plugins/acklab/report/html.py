"""The static HTML report of a run: heatmap, matrix, delivery errors, guarantee model, per-scenario timelines."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Collection, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.plan.presets import is_catalog_bug
from acklab.report.charts import heatmap, timeline
from acklab.store.history import Regression
from acklab.store.runs import Manifest, RunDir, known_bugs_dir
from acklab.workload.java_errors import with_java

COLUMNS = (
    "scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered",
    "indeterminate", "ack_latency_p99_ms",
)


POOL_FROM = 16  # timelines from which drawing them in a process per core beats starting those processes


class TimelineDrawing:
    """Draws the per-scenario timelines of a run (``charts.timeline``, one PNG per scenario with a send
    log) from its construction on: with many, in a process per core, so the caller can meanwhile do
    other work (the verdict's GX validation does not need them); with few, when waited for.
    ``manifest`` is the run's, as read for them. ``close()`` (or leaving it as a context manager)
    stops what is still drawing."""

    def __init__(self, run: RunDir) -> None:
        out = run.report
        out.root.mkdir(exist_ok=True)
        self.manifest = run.read_manifest()
        self._drawn = [e for e in self.manifest.scenarios if e.send_log is not None and (run.root / e.send_log).exists()]
        self._charts = [(run.root / e.send_log, e.load_started, e.fault_timeline, e.scenario, out.timeline(e.scenario)) for e in self._drawn]
        workers = min(os.cpu_count() or 1, len(self._charts))
        self._pool: ProcessPoolExecutor | None = None
        self._pngs: Iterator[Path] | None = None
        if len(self._charts) >= POOL_FROM and workers >= 2:
            # spawn, not fork: the Airflow task process that calls this runs threads.
            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            chunks = max(1, len(self._charts) // (4 * workers))
            self._pngs = self._pool.map(timeline, *zip(*self._charts, strict=True), chunksize=chunks)  # submitted now

    def wait(self) -> list[dict[str, Any]]:
        """The report's timeline entries, in manifest order, once every PNG is written."""
        pngs = list(self._pngs) if self._pngs is not None else [timeline(*args) for args in self._charts]
        self.close()
        return [
            {"scenario": entry.scenario, "effect": entry.fault_effect, "png": png.name, "earlier": entry.earlier_attempts}
            for entry, png in zip(self._drawn, pngs, strict=True)
        ]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> TimelineDrawing:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def build_report(
    run: RunDir, statuses: dict[str, str], status: str, data_docs: Path | None, regressions: list[Regression], unverified: list[Regression],
    beliefs: list[dict[str, Any]], observations: list[dict[str, Any]], control: list[str], drawing: TimelineDrawing | None = None,
    caught: Collection[str] = (),
) -> Path:
    """Write the run's HTML report with its PNGs; return the index path. `control`: what the
    negative controls showed (`acklab.checker.verdict.Verdict.control_lines`), said before the matrix,
    and `caught` the controls counted exactly (each control row says whether it was);
    `drawing`: the run's timelines if already being drawn (else they are drawn now; closed either way)."""
    from acklab.model.tables import default_tables

    out = run.report
    with drawing or TimelineDrawing(run) as timelines:
        manifest = timelines.manifest
        rows = run.read_matrix()
        heatmap(rows, statuses, out.heatmap)
        drawn = timelines.wait()
    disturbed = {
        entry.scenario: [f"run again: {a.incomplete_reason}" for a in entry.earlier_attempts] + [f"unplanned: {d}" for d in entry.disturbances]
        for entry in manifest.scenarios
    }
    template = _templates().get_template("report.html.j2")
    index = out.index
    index.write_text(
        template.render(
            run_id=manifest.run_id,
            status=status,
            control=control,
            caught=set(caught),
            disturbed=disturbed,
            topology=manifest.topology,
            rows=rows,
            statuses=statuses,
            columns=COLUMNS,
            heatmap="heatmap.png",
            timelines=drawn,
            model_tables=default_tables(),
            regressions=regressions,
            unverified=unverified,
            beliefs=beliefs,
            observations=observations,
            delivery_errors=delivery_errors(manifest),
            data_docs=os.path.relpath(data_docs, out.root) if data_docs else "",
            matrix_json=os.path.relpath(run.matrix_json, out.root),
            known_bugs=os.path.relpath(known_bugs_dir() / "index.html", out.root) if is_catalog_bug(manifest) else "",
        )
    )
    return index


def delivery_errors(manifest: Manifest) -> list[dict[str, Any]]:
    """Per scenario with failed deliveries: its librdkafka errors with counts and Java equivalents."""
    return [{"scenario": e.scenario, "errors": with_java(e.delivery_errors)} for e in manifest.scenarios if e.delivery_errors]


def beliefs_page(run_id: str) -> str:
    """The name of a run's beliefs page in the Data Docs site."""
    return f"beliefs_{run_id}.html"


def write_beliefs_page(path: Path, run_id: str, beliefs: list[dict[str, Any]]) -> Path:
    """Write the run's belief findings as a page (of the Data Docs site) at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_templates().get_template("beliefs_page.html.j2").render(run_id=run_id, beliefs=beliefs))
    return path


def _templates() -> Environment:
    return Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape())

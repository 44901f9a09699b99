"""The static HTML report of a run: heatmap, matrix, guarantee model, per-scenario timelines."""

from __future__ import annotations

import os
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.report.charts import heatmap, timeline
from acklab.report.history import Regression
from acklab.store import RunDir

COLUMNS = (
    "scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered",
    "indeterminate", "ack_latency_p99_ms",
)


def build_report(
    run: RunDir, statuses: dict[str, str], status: str, data_docs: Path | None, regressions: list[Regression], unverified: list[Regression]
) -> Path:
    """Write the run's HTML report with its PNGs; return the index path."""
    from acklab.model_table import default_tables

    out = run.report
    out.root.mkdir(exist_ok=True)
    manifest = run.read_manifest()
    rows = run.read_matrix()
    heatmap(rows, statuses, out.heatmap)
    timelines = []
    for entry in manifest.scenarios:
        if entry.send_log is None or not (send_log := run.root / entry.send_log).exists():
            continue
        png = timeline(send_log, entry.load_started, entry.fault_timeline, entry.scenario, out.timeline(entry.scenario))
        timelines.append({"scenario": entry.scenario, "effect": entry.fault_effect, "png": png.name})
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("report.html.j2")
    index = out.index
    index.write_text(
        template.render(
            run_id=manifest.run_id,
            status=status,
            topology=manifest.topology,
            rows=rows,
            statuses=statuses,
            columns=COLUMNS,
            heatmap="heatmap.png",
            timelines=timelines,
            model_tables=default_tables(),
            regressions=regressions,
            unverified=unverified,
            data_docs=os.path.relpath(data_docs, out.root) if data_docs else "",
            matrix_json=os.path.relpath(run.matrix_json, out.root),
        )
    )
    return index

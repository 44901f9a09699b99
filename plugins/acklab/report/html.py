"""The static HTML report of a run: heatmap, matrix, guarantee model, per-scenario timelines."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.report.charts import heatmap, timeline
from acklab.report.history import Regression

REPORT_DIR = "report"
COLUMNS = (
    "scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered",
    "indeterminate", "ack_latency_p99_ms",
)


def build_report(run_dir: Path, statuses: dict[str, str], status: str, data_docs: Path | None, regressions: list[Regression]) -> Path:
    """Write `<run>/report/index.html` with its PNGs; return the index path."""
    from acklab.model_table import default_tables

    out = run_dir / REPORT_DIR
    out.mkdir(exist_ok=True)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    matrix_json = run_dir / "audit" / "matrix.json"
    rows = json.loads(matrix_json.read_text())
    heatmap(rows, statuses, out / "heatmap.png")
    timelines = []
    for entry in manifest["scenarios"]:
        send_log = run_dir / entry["send_log"]
        if not send_log.exists():
            continue
        png = timeline(send_log, entry["load_started"], entry["fault_timeline"], entry["scenario"], out / f"timeline-{entry['scenario']}.png")
        timelines.append({"scenario": entry["scenario"], "effect": entry["fault_effect"], "png": png.name})
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("report.html.j2")
    index = out / "index.html"
    index.write_text(
        template.render(
            run_id=manifest["run_id"],
            status=status,
            topology=manifest["topology"],
            rows=rows,
            statuses=statuses,
            columns=COLUMNS,
            heatmap="heatmap.png",
            timelines=timelines,
            model_tables=default_tables(),
            regressions=regressions,
            data_docs=os.path.relpath(data_docs, out) if data_docs else "",
            matrix_json=os.path.relpath(matrix_json, out),
        )
    )
    return index

"""Side-by-side report of the same matrix on several Kafka versions (the version-regression DAG)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.paths import RESULT_FILE, runs_dir
from acklab.report.html import REPORT_DIR

COMPARISONS_DIR = "comparisons"
COUNTS = ("lost", "duplicates", "failed", "reordered")


@dataclass(frozen=True)
class VersionRun:
    kafka_version: str
    run_dir: Path
    status: str
    statuses: dict[str, str]
    rows: dict[str, dict]


@dataclass(frozen=True)
class Comparison:
    html: Path
    runs: list[VersionRun]
    differing: list[str]

    @property
    def status(self) -> str:
        statuses = {run.status for run in self.runs}
        return "fail" if "fail" in statuses else "incomplete" if statuses != {"pass"} else "pass"

    def summary_lines(self) -> list[str]:
        lines = [f"Kafka {run.kafka_version}: {run.status} ({run.run_dir.name})" for run in self.runs]
        for scenario in self.differing:
            verdicts = ", ".join(f"{run.kafka_version} {run.statuses.get(scenario, 'absent')}" for run in self.runs)
            lines.append(f"DIFFERS {scenario}: {verdicts}")
        return lines


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def load_run(run_dir: Path) -> VersionRun:
    """A validated run's Kafka version, verdicts and matrix rows (from result.json and manifest.json)."""
    result = json.loads((run_dir / RESULT_FILE).read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    rows = {row["scenario"]: row for row in json.loads(Path(result["matrix"]).read_text())}
    return VersionRun(manifest["topology"]["kafka_version"], run_dir, result["status"], result["scenarios"], rows)


def build_comparison(run_dirs: list[Path]) -> Comparison:
    """Write `runs/comparisons/<first run>/index.html`: each version's heatmap side by side, and one
    table of every scenario's verdict and counts per version, differing verdicts first."""
    runs = sorted((load_run(d) for d in run_dirs), key=lambda r: _version_key(r.kafka_version))
    scenarios = sorted({s for run in runs for s in run.statuses})
    differing = [s for s in scenarios if len({run.statuses.get(s) for run in runs}) > 1]
    out = runs_dir() / COMPARISONS_DIR / min(d.name for d in run_dirs)
    out.mkdir(parents=True, exist_ok=True)
    heatmaps = []
    for run in runs:
        png = out / f"heatmap-{run.kafka_version}.png"
        shutil.copyfile(run.run_dir / REPORT_DIR / "heatmap.png", png)
        report = os.path.relpath(run.run_dir / REPORT_DIR / "index.html", out)
        heatmaps.append({"version": run.kafka_version, "status": run.status, "png": png.name, "report": report})
    table = [
        {
            "scenario": s,
            "differs": s in differing,
            "cells": [{"status": run.statuses.get(s, "absent"), "row": run.rows.get(s, {})} for run in runs],
        }
        for s in sorted(scenarios, key=lambda s: (s not in differing, s))
    ]
    comparison = Comparison(out / "index.html", runs, differing)
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("compare.html.j2")
    comparison.html.write_text(
        template.render(status=comparison.status, runs=runs, heatmaps=heatmaps, table=table, counts=COUNTS, differing=differing)
    )
    (out / "comparison.json").write_text(
        json.dumps({"status": comparison.status, "runs": [str(r.run_dir) for r in runs], "differing": differing}, indent=2)
    )
    return comparison

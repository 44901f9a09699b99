"""Side-by-side report of the same matrix on several (Kafka version, client family and version) pairs (the
version-regression DAG and `acklab versions`)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.checker.verdict import overall
from acklab.report.ci_results import RunResults, comparison_results, junit_xml, pair_label, read_run_results
from acklab.store.runs import ComparisonDir, RunDir, write_json

COUNTS = ("lost", "duplicates", "failed", "reordered")


@dataclass(frozen=True)
class VersionRun:
    kafka_version: str
    client_family: str
    client_version: str
    run_dir: Path
    status: str
    statuses: dict[str, str]
    rows: dict[str, dict]

    @property
    def label(self) -> str:
        return f"Kafka {self.kafka_version} / {self.client_family} {self.client_version}"

    @property
    def slug(self) -> str:
        return f"{self.kafka_version}-{self.client_family}-{self.client_version}"


@dataclass(frozen=True)
class Comparison:
    html: Path
    runs: list[VersionRun]
    differing: list[str]

    @property
    def status(self) -> str:
        return overall({run.status for run in self.runs})

    def summary_lines(self) -> list[str]:
        """The scenarios whose verdict differs between runs first, then each run's status."""
        lines = [
            f"DIFFERS {scenario}: " + ", ".join(f"{run.slug} {run.statuses.get(scenario, 'absent')}" for run in self.runs)
            for scenario in self.differing
        ]
        return lines + [f"{run.label}: {run.status} ({run.run_dir.name})" for run in self.runs]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def load_run(run_dir: Path) -> VersionRun:
    """A validated run's Kafka version, verdicts and matrix rows (from its result and manifest)."""
    run = RunDir(run_dir)
    result = run.read_result()
    rows = {row["scenario"]: row for row in run.read_matrix()}
    manifest = run.read_manifest()
    return VersionRun(manifest.topology["kafka_version"], manifest.client_family, manifest.client_version, run_dir, result["status"], result["scenarios"], rows)


def build_comparison(run_dirs: list[Path]) -> Comparison:
    """Write `runs/comparisons/<first run>/index.html`: each version's heatmap side by side, and one
    table of every scenario's verdict and counts per version, differing verdicts first."""
    runs = sorted((load_run(d) for d in run_dirs), key=lambda r: (_version_key(r.kafka_version), r.client_family, _version_key(r.client_version)))
    scenarios = sorted({s for run in runs for s in run.statuses})
    differing = [s for s in scenarios if len({run.statuses.get(s) for run in runs}) > 1]
    pairs = [(pair_label(results), results) for results in (_results(run.run_dir) for run in runs)]  # before anything is written
    out = ComparisonDir.named(min(d.name for d in run_dirs))
    out.root.mkdir(parents=True, exist_ok=True)
    heatmaps = []
    for run in runs:
        png = out.heatmap(run.slug)
        report = RunDir(run.run_dir).report
        shutil.copyfile(report.heatmap, png)
        heatmaps.append({"version": run.label, "status": run.status, "png": png.name, "report": os.path.relpath(report.index, out.root)})
    table = [
        {
            "scenario": s,
            "differs": s in differing,
            "cells": [{"status": run.statuses.get(s, "absent"), "row": run.rows.get(s, {})} for run in runs],
        }
        for s in sorted(scenarios, key=lambda s: (s not in differing, s))
    ]
    comparison = Comparison(out.index, runs, differing)
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("compare.html.j2")
    comparison.html.write_text(
        template.render(status=comparison.status, runs=runs, heatmaps=heatmaps, table=table, counts=COUNTS, differing=differing)
    )
    write_json(out.summary, {"status": comparison.status, "runs": [str(r.run_dir) for r in runs], "differing": differing})
    write_json(out.results_json, comparison_results(pairs, differing).model_dump(mode="json"))
    junit_xml(pairs).write(str(out.junit_xml), pretty=True)
    return comparison


def _results(run_dir: Path) -> RunResults:
    """A compared run's results (`results.json`); ValueError naming the run if it has none (validated
    by an acklab from before results were kept: validate it again)."""
    run = RunDir(run_dir)
    if not run.results_json.is_file():
        raise ValueError(f"run {run_dir.name} has no {run.results_json.name}: validate it again before comparing it")
    return read_run_results(run)

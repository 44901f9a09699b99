"""The field-notes DAG's report: one page over every preset's run, each claim with what acklab measured."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.checker.verdict import overall
from acklab.plan.presets import run_preset
from acklab.report.html import delivery_errors
from acklab.store.runs import FieldNotesDir, RunDir, write_json


@dataclass(frozen=True)
class FieldNotesReport:
    html: Path
    status: str  # the worst run verdict: fail > incomplete > pass
    lines: list[str]


def build_field_notes(run_dirs: list[Path]) -> FieldNotesReport:
    """Write `runs/field-notes/<first run>/index.html` and `field-notes.json` from the presets' runs."""
    out = FieldNotesDir.named(min(d.name for d in run_dirs))
    out.root.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for run in map(RunDir, sorted(run_dirs)):
        result, manifest = run.read_result(), run.read_manifest()
        name = manifest.preset or ""
        known = run_preset(manifest)
        runs.append({
            "preset": name, "source": known.source if known else "", "description": known.description if known else "",
            "status": result["status"], "run": run.run_id, "report": os.path.relpath(result["html"], out.root),
            "observations": result.get("observations", []), "beliefs": result.get("beliefs", []),
            "delivery_errors": delivery_errors(manifest),
        })
    status = overall({r["status"] for r in runs})
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("field_notes.html.j2")
    out.index.write_text(template.render(status=status, runs=runs))
    write_json(out.summary, {"status": status, "runs": runs})
    lines = [f"{r['preset']}: {r['status']} ({r['run']})" for r in runs]
    lines += [f"  {o['status']}: {o['claim']}: {o['measured']}" for r in runs for o in r["observations"]]
    return FieldNotesReport(out.index, status, lines)

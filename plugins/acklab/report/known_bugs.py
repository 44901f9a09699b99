"""The known-bugs page: each bug preset of the catalog (`acklab.plan.presets.BUGS`), its tracker entry with
the state it was seen in and when, the versions on which acklab saw it red and green, when it last ran,
and its repro folders, from the runs and the `acklab repro` folders in the store."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.base.paths import runs_dir
from acklab.plan.preset_files import Preset
from acklab.plan.presets import BUGS, is_catalog_bug
from acklab.store.runs import REPROS_DIR, Manifest, RunDir, known_bugs_dir, write_json


@dataclass
class BugRecord:
    """What the run store knows of one bug preset. `red`/`green`: the versions (Kafka and client, one
    entry per client of a run) on which its scenarios failed/passed; `incomplete`: those whose
    evidence was incomplete; `rates`: per versions, how many of its runs there were red."""

    preset: str
    source: str
    tracker: str
    description: str
    state: str  # the tracker entry's state as last read (`TrackerState.state`), "" without a tracker entry
    seen: str  # what the tracker showed then
    checked: str  # when it was read, YYYY-MM-DD
    red: list[str] = field(default_factory=list)
    green: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    last_ran: str | None = None  # UTC, of its most recent run
    runs: int = 0
    repros: list[str] = field(default_factory=list)  # its `acklab repro` folders (paths), newest first
    rates: dict[str, list[int]] = field(default_factory=dict)  # versions -> [runs red, runs red or green]: the reproduction rate there


def _client_statuses(manifest: Manifest, result: dict) -> dict[str, str]:
    """"Kafka V / family version" -> that client's status in the run: red if any of its scenarios
    failed, else green if every one passed, else incomplete (negative controls left out)."""
    statuses: dict[str, set[str]] = {}
    for entry in manifest.scenarios:
        if not entry.control:
            status = result.get("scenarios", {}).get(entry.scenario, result["status"])
            statuses.setdefault(f"Kafka {manifest.kafka_version} / {entry.client_family} {entry.client_version}", set()).add(status)
    return {
        versions: "fail" if "fail" in seen else "pass" if seen == {"pass"} else "incomplete" for versions, seen in statuses.items()
    }


def known_bugs(root: Path | None = None) -> list[BugRecord]:
    """Every bug preset with what the runs under `root` (default: the run store) saw of it."""
    records = {name: _record(preset) for name, preset in BUGS.items()}
    latest: dict[str, float] = {}
    root = root or runs_dir()
    bug_runs: dict[str, str] = {}  # run id -> the bug preset it ran
    for result_file in sorted(root.glob("*/result.json")):
        try:
            manifest = RunDir(result_file.parent).read_manifest()
            clients = _client_statuses(manifest, json.loads(result_file.read_text()))
        except (OSError, ValueError, KeyError):
            continue
        record = records.get(manifest.preset or "") if is_catalog_bug(manifest) else None
        if record is None:  # not a run of a catalog bug (a team's own presets file may reuse a name)
            continue
        bug_runs[manifest.run_id] = record.preset
        record.runs += 1
        for versions, status in clients.items():
            bucket = {"fail": record.red, "pass": record.green}.get(status, record.incomplete)
            if versions not in bucket:
                bucket.append(versions)
            if status in ("fail", "pass"):  # an incomplete run neither reproduced nor refuted it
                rate = record.rates.setdefault(versions, [0, 0])
                rate[0] += status == "fail"
                rate[1] += 1
        latest[record.preset] = max(latest.get(record.preset, 0.0), result_file.stat().st_mtime)
    for name, when in latest.items():
        records[name].last_ran = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
    for folder in sorted((root / REPROS_DIR).glob("*/run.sh"), reverse=True):  # named <run id>-<scenario>: newest first
        if run_id := next((run_id for run_id in bug_runs if folder.parent.name.startswith(f"{run_id}-")), None):
            records[bug_runs[run_id]].repros.append(str(folder.parent))
    for record in records.values():
        for bucket in (record.red, record.green, record.incomplete):
            bucket.sort()
        record.rates = dict(sorted(record.rates.items()))
    return list(records.values())


def _record(preset: Preset) -> BugRecord:
    known = preset.tracker_state
    return BugRecord(
        preset.name, preset.source, preset.tracker, preset.description,
        known.state if known else "", known.seen if known else "", known.checked.isoformat() if known else "",
    )


def write_known_bugs(root: Path | None = None) -> Path:
    """Write the page (`known-bugs/index.html` and `known-bugs.json` in the run store); its path."""
    bugs = known_bugs(root)
    out = known_bugs_dir()
    out.mkdir(parents=True, exist_ok=True)
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("known_bugs.html.j2")
    (out / "index.html").write_text(template.render(bugs=bugs))
    write_json(out / "known-bugs.json", [asdict(bug) for bug in bugs])
    return out / "index.html"

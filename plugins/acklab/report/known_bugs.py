"""The known-bugs page: each bug preset of the catalog (`acklab.plan.presets.BUGS`), its tracker entry, the
versions on which acklab saw it red and green, and when it last ran, from the runs in the store."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from acklab.base.paths import runs_dir
from acklab.plan.presets import BUGS, is_catalog_bug
from acklab.store.runs import Manifest, RunDir, known_bugs_dir, write_json


@dataclass
class BugRecord:
    """What the run store knows of one bug preset. `red`/`green`: the versions (Kafka and client)
    of its runs that failed/passed; `incomplete`: those whose evidence was incomplete."""

    preset: str
    source: str
    tracker: str
    description: str
    red: list[str] = field(default_factory=list)
    green: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    last_ran: str | None = None  # UTC, of its most recent run
    runs: int = 0


def _versions(manifest: Manifest) -> str:
    clients = sorted({f"{e.client_family} {e.client_version}" for e in manifest.scenarios})
    return f"Kafka {manifest.kafka_version} / {', '.join(clients) or 'no client'}"


def known_bugs(root: Path | None = None) -> list[BugRecord]:
    """Every bug preset with what the runs under `root` (default: the run store) saw of it."""
    records = {
        name: BugRecord(name, preset.source, preset.tracker, preset.description) for name, preset in BUGS.items()
    }
    latest: dict[str, float] = {}
    for result_file in sorted((root or runs_dir()).glob("*/result.json")):
        try:
            manifest = RunDir(result_file.parent).read_manifest()
            status = json.loads(result_file.read_text())["status"]
        except (OSError, ValueError, KeyError):
            continue
        record = records.get(manifest.preset or "") if is_catalog_bug(manifest) else None
        if record is None:  # not a run of a catalog bug (a team's own presets file may reuse a name)
            continue
        versions = _versions(manifest)
        bucket = {"fail": record.red, "pass": record.green}.get(status, record.incomplete)
        if versions not in bucket:
            bucket.append(versions)
        record.runs += 1
        latest[record.preset] = max(latest.get(record.preset, 0.0), result_file.stat().st_mtime)
    for name, when in latest.items():
        records[name].last_ran = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
    for record in records.values():
        for bucket in (record.red, record.green, record.incomplete):
            bucket.sort()
    return list(records.values())


def write_known_bugs(root: Path | None = None) -> Path:
    """Write the page (`known-bugs/index.html` and `known-bugs.json` in the run store); its path."""
    bugs = known_bugs(root)
    out = known_bugs_dir()
    out.mkdir(parents=True, exist_ok=True)
    template = Environment(loader=PackageLoader("acklab"), autoescape=select_autoescape()).get_template("known_bugs.html.j2")
    (out / "index.html").write_text(template.render(bugs=bugs))
    write_json(out / "known-bugs.json", [asdict(bug) for bug in bugs])
    return out / "index.html"

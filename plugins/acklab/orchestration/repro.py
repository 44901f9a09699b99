"""`acklab repro`: a red row made into a folder a maintainer runs with one command, shrunk first.

The folder (in the run store's `repros/`) holds the params that reproduce the row (`params.json`,
run by `run.sh`), the topology, broker and client configs, the fault schedule as it ran, the exact
versions, the affected records with their send-log and topic-dump lines, and the matching client
and broker log lines. Shrinking re-runs the scenario with fewer messages, a shorter fault, fewer
fault steps and fewer settings of its own profile, keeping each change while the row stays red for the same expectation.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from acklab.base.paths import PROJECT_ROOT
from acklab.base.spec import SpecError
from acklab.checker.verdict import Verdict
from acklab.cluster.layout import SERVER_LOG
from acklab.store.runs import RunDir, ScenarioEntry, repros_dir, write_json
from acklab.workload import families

MIN_MESSAGES = 200  # shrinking stops halving the load below this
MAX_SHRINK_RUNS = 6
LOG_LINES = 200  # per log file kind in the folder
AFFECTED = 50  # affected records listed
NOT_AFFECTED = ("delivered", "aborted_clean")
LOG_MATCH = re.compile(r"error|exception|fatal|warn|timed? ?out|fenced|invalid|abort", re.IGNORECASE)


@dataclass
class Repro:
    """A written repro folder, the params it runs, the red run its evidence is from, and the runs it
    took (the row alone, then each shrinking step: what it tried, and whether it stayed red)."""

    folder: Path
    params: dict[str, Any]
    red_run: RunDir
    runs: int = 0
    steps: list[str] = field(default_factory=list)


def scenario_params(run: RunDir, scenario: str) -> tuple[dict[str, Any], ScenarioEntry]:
    """The run params that run `scenario` of `run` alone, on the same versions; SpecError if the
    run has no such scenario."""
    manifest = run.read_manifest()
    entry = next((e for e in manifest.scenarios if e.scenario == scenario), None)
    if entry is None:
        names = ", ".join(e.scenario for e in manifest.scenarios)
        raise SpecError(f"run {run.run_id} has no scenario {scenario!r}; it has: {names}")
    params = dict(manifest.params[0])
    if not params.get("schedule"):
        params["faults"] = [entry.fault]
    params.update(
        preset=None, presets_file=None, profiles=[entry.profile], kafka_version=manifest.kafka_version, clients=[], client_version=None,
        client=f"{entry.client_family}:{entry.client_version}",
    )
    if params.get("custom_profiles"):
        params["custom_profiles"] = {k: v for k, v in params["custom_profiles"].items() if k == entry.profile} or None
    return params, entry


def failed_suites(verdict: Verdict, scenario: str) -> set[str]:
    """The suites the scenario's row failed ({} if it did not fail)."""
    found = next((s for s in verdict.scenarios if s.scenario == scenario), None)
    if found is None or found.status != "fail":
        return set()
    return {failure.suite for failure in found.failed} or {"fatal"}


SHRINKABLE_SETTINGS = ("linger_ms", "max_in_flight", "request_timeout_ms", "socket_timeout_ms", "delivery_timeout_ms", "retries")
"""A typed profile's settings shrinking may drop (back to the profile model's default), and every
`overrides` entry: the class-defining ones (acks, idempotence, transactions) stay."""


def _fewer_settings(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Candidates with one setting of the params' own typed profiles dropped."""
    found = []
    for name, spec in (params.get("custom_profiles") or {}).items():
        keys = [k for k in SHRINKABLE_SETTINGS if k in spec] + [f"overrides.{k}" for k in spec.get("overrides") or {}]
        for key in keys:
            if key.startswith("overrides."):
                smaller = {**spec, "overrides": {k: v for k, v in spec["overrides"].items() if k != key.removeprefix("overrides.")}}
            else:
                smaller = {k: v for k, v in spec.items() if k != key}
            found.append((f"{name} without {key}", {**params, "custom_profiles": {**params["custom_profiles"], name: smaller}}))
    return found


def shrink(params: dict[str, Any], red: Callable[[dict[str, Any]], RunDir | None], limit: int = MAX_SHRINK_RUNS) -> tuple[dict[str, Any], RunDir | None, list[str]]:
    """The smallest params `red` still finds red (its run), trying in turn: half the messages,
    half each fault step's duration, each fault step left out, each setting of its own typed
    profiles dropped; at most `limit` runs."""
    best, best_run, steps = params, None, []

    def candidates(current: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        found = []
        halved_s = current["messages"] // 2 / current["rate"] if current.get("rate") else None
        starts = [step.get("at_s", current.get("fault_at_s", 2.0)) for step in current.get("schedule") or [{}]]
        if current["messages"] // 2 >= MIN_MESSAGES and (halved_s is None or max(starts) < halved_s):  # each fault still starts in the load
            found.append((f"messages {current['messages']} -> {current['messages'] // 2}", {**current, "messages": current["messages"] // 2}))
        schedule = current.get("schedule") or []
        if any(step.get("duration_s", 0) > 1 for step in schedule):
            shorter = [{**step, "duration_s": max(1.0, step.get("duration_s", 10.0) / 2)} for step in schedule]
            found.append(("fault steps half as long", {**current, "schedule": shorter}))
        if len(schedule) > 1:
            found += [(f"without step {n} ({step['fault']})", {**current, "schedule": schedule[:n] + schedule[n + 1 :]}) for n, step in enumerate(schedule)]
        return found + _fewer_settings(current)

    runs = 0
    progress = True
    while progress and runs < limit:
        progress = False
        for description, candidate in candidates(best):
            if runs >= limit:
                break
            runs += 1
            run = red(candidate)
            steps.append(f"{description}: {'still red' if run is not None else 'not red, kept the previous'}")
            if run is not None:
                best, best_run, progress = candidate, run, True
                break
    return best, best_run, steps


def write_folder(
    run: RunDir, scenario: str, verdict_line: str, params: dict[str, Any], original: dict[str, Any], steps: list[str], out: Path
) -> Path:
    """Write the repro folder `out` from the red `run`'s evidence of `scenario` (`verdict_line`: its verdict)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    manifest = run.read_manifest()
    entry = next(e for e in manifest.scenarios if e.scenario == scenario)
    result = run.read_result() if run.result.exists() else {}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "params.json", params)
    write_json(out / "params.original.json", original)
    (out / "topology.yaml").write_text(yaml.safe_dump(manifest.topology, sort_keys=False))
    broker_config = next(iter(sorted(p for folder in run.cluster_folders() for p in folder.glob("node-*/server.properties"))), None)
    if broker_config is not None:
        (out / "server.properties").write_text(broker_config.read_text())
    family = families.named(entry.client_family)
    family.write_config(out / family.config_file, entry.producer_config)
    write_json(out / "schedule.json", [record.model_dump() for record in entry.fault_timeline])
    versions = {
        "kafka": manifest.kafka_version, "client": f"{entry.client_family} {entry.client_version}",
        "librdkafka": entry.librdkafka_version or None, "acklab": _commit(),
    }
    write_json(out / "versions.json", versions)

    outcomes = pq.read_table(run.audit.outcomes, filters=[("scenario", "=", scenario)])
    moved = pc.or_(outcomes["misdirected"], outcomes["misrouted"])
    flagged = pc.or_(moved, pc.or_(outcomes["offset_mismatch"], outcomes["reordered"]))
    odd = pc.or_(pc.invert(pc.is_in(outcomes["outcome"], value_set=pa.array(NOT_AFFECTED))), flagged)
    # Records in another topic or partition first: they are few, and the rest may be many.
    chosen = outcomes.filter(odd)
    chosen = pa.concat_tables([chosen.filter(chosen["misdirected"]), chosen.filter(pc.invert(chosen["misdirected"]))])
    affected = chosen.slice(0, AFFECTED).to_pylist()
    send_log = pq.read_table(run.root / entry.send_log).to_pandas() if entry.send_log else None
    records = pq.read_table(run.audit.topic_records, filters=[("scenario", "=", scenario)]).to_pandas()
    lines = [f"{len(affected)} of {int(pc.sum(odd).as_py() or 0)} affected records (outcome other than {' / '.join(NOT_AFFECTED)}, or misdirected, "
             "misrouted, offset_mismatch, reordered; misdirected first); per record: its outcome, its send-log line, its copies in "
             "the scenario's topics\n"]
    for row in affected:
        lines.append(f"\nid {row['id']}: {json.dumps({k: v for k, v in row.items() if k != 'scenario'}, default=str)}")
        if send_log is not None:
            sent = send_log[send_log["id"] == row["id"]]
            lines += [f"  send log: {json.dumps(r, default=str)}" for r in sent.to_dict("records")]
        lines += [f"  topic: {json.dumps(r, default=str)}" for r in records[records["id"] == row["id"]].drop(columns=["scenario"]).to_dict("records")]
    (out / "records.txt").write_text("\n".join(lines) + "\n")

    producer_logs = sorted(run.scenario(scenario).producers.glob("*.log"))
    (out / "client.log").write_text(_matching(producer_logs, None))
    (out / "broker.log").write_text(_matching(sorted(p for folder in run.cluster_folders() for p in folder.glob(f"node-*/{SERVER_LOG}")), entry.topic))
    (out / "run.sh").write_text(
        "#!/bin/sh\n# Re-run this red row: acklab from a checkout (ACKLAB_HOME, default the one that wrote it), after `make setup`.\n"
        f'cd "${{ACKLAB_HOME:-{PROJECT_ROOT}}}" && exec .venv/bin/acklab run --params "{out}/params.json" "$@"\n'
    )
    (out / "run.sh").chmod(0o755)
    (out / "README.md").write_text(_readme(scenario, entry, versions, params, steps, out))
    (out / "verdict.txt").write_text(f"status: {result.get('status')}\n{verdict_line}\nreport: {result.get('html')}\n")
    return out


def _matching(logs: list[Path], topic: str | None) -> str:
    """Lines of `logs` that name an error, exception, timeout, fencing or abort (broker logs, with
    `topic` given: lines of that topic, or any ERROR line), at most LOG_LINES, each after its file's name."""
    found = []
    for log in logs:
        for text in log.read_text(errors="replace").splitlines():
            named = topic is None or topic in text or " ERROR " in text
            hit = named and LOG_MATCH.search(text.replace(topic, "") if topic else text)
            if hit:
                found.append(f"{log.parent.name}/{log.name}: {text}")
    return "\n".join(found[:LOG_LINES]) + ("\n" if found else "no matching line\n")


def _commit() -> str | None:
    done = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def _readme(scenario: str, entry: ScenarioEntry, versions: dict[str, Any], params: dict[str, Any], steps: list[str], out: Path) -> str:
    schedule = params.get("schedule") or [{"fault": f} for f in params.get("faults", [])]
    faults = "; ".join(f"{s['fault']} at {s.get('at_s', params.get('fault_at_s'))} s for {s.get('duration_s', params.get('fault_duration_s'))} s on {s.get('target', 'its default target')}" for s in schedule)
    shrunk = "\n".join(f"- {step}" for step in steps) or "- not shrunk"
    return f"""# acklab repro: {scenario}

What went red: {entry.incomplete_reason or ""}{"fatal producer error: " + entry.fatal_error if entry.fatal_error else ""}{" hanging: " + entry.hanging_detail if entry.hanging_detail else ""}
(see `verdict.txt` for the failed expectations).

- Kafka {versions['kafka']} (KRaft, topology `topology.yaml`, broker config `server.properties`)
- client {versions['client']}{" (librdkafka " + versions['librdkafka'] + ")" if versions['librdkafka'] else ""}, producer config `{families.named(entry.client_family).config_file}`
- load: {params['messages']} messages at {params.get('rate') or 'full'} msg/s, {params.get('keys', 16)} keys, {params.get('producers', 1)} producer(s)
- faults: {faults} (as they ran, with what the proxy did: `schedule.json`)
- acklab commit {versions['acklab']}

Run it: `{shlex.quote(str(out / "run.sh"))}` (exit 1 while the bug is there). It runs `acklab run --params params.json`
from an acklab checkout after `make setup`.

Shrunk from `params.original.json`:
{shrunk}

Evidence: `records.txt` (the affected records: outcome, send-log line, topic copies), `client.log` and
`broker.log` (the lines naming errors, timeouts, fencing or aborts).
"""


def repro(
    run: RunDir, scenario: str, *, shrink_runs: int = MAX_SHRINK_RUNS, execute: Callable[[dict[str, Any]], tuple[RunDir, Verdict]],
    overrides: dict[str, Any] | None = None,
) -> Repro:
    """The repro folder of `scenario`, red in `run`: run alone again (its params with `overrides`),
    then shrunk with up to `shrink_runs` more runs made by `execute` (params -> the run and its
    verdict). SpecError if the row is not red, or not red again when run alone."""
    params, _ = scenario_params(run, scenario)
    params.update(overrides or {})
    status = run.read_result().get("scenarios", {}).get(scenario) if run.result.exists() else None
    if status != "fail":
        raise SpecError(f"{scenario} of run {run.run_id} is not red ({status or 'no verdict'}): nothing to reproduce")
    lines: dict[Path, str] = {}

    def attempt(candidate: dict[str, Any]) -> tuple[RunDir, set[str]]:
        candidate_run, verdict = execute(candidate)
        (only,) = verdict.checked
        lines[candidate_run.root] = only.summary_line()
        return candidate_run, failed_suites(verdict, only.scenario)

    first_run, wanted = attempt(params)
    if not wanted:
        raise SpecError(f"{scenario} did not go red again when run alone (run {first_run.run_id}): it does not reproduce")

    def red(candidate: dict[str, Any]) -> RunDir | None:
        try:
            candidate_run, failed = attempt(candidate)
        except SpecError:
            return None
        return candidate_run if failed & wanted else None

    smallest, smallest_run, steps = shrink(params, red, shrink_runs)
    red_run = smallest_run or first_run
    folder = repros_dir() / f"{run.run_id}-{scenario}"
    steps = [f"re-run alone: red ({', '.join(sorted(wanted))})", *steps]
    write_folder(red_run, next(s.scenario for s in red_run.read_manifest().scenarios if not s.control), lines[red_run.root], smallest, params, steps, folder)
    return Repro(folder, smallest, red_run, len(steps), steps)

"""`acklab explore` and the weekly exploration DAG: run the trials the search chooses
(`acklab.plan.explore.Search`: drawn from the space, or heavier variants of trials whose faults
reached their client, as told by each trial's run) until the budget is spent; confirm every red row
once and shrink it with `acklab repro` (with the run's negative controls, so the confirming run proves it could go red);
label it with the catalog's known bug it shows (`acklab.plan.presets.known_bugs`), and write a
maintainer-ready report of each confirmed finding.

A finding is reported once per fingerprint (the bug it shows, or its client and the expectations it
failed): a red row of a fingerprint already found counts as seen again. A trial's own run has no
negative controls (a trial proves nothing by passing: only a confirmed finding is reported), its
confirming run has them. Every time spent counts against the budget; a finding is confirmed even when
that overruns the budget, and no trial starts after it."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from acklab.base.spec import SpecError, parse_model
from acklab.checker.verdict import ScenarioVerdict, Verdict
from acklab.cluster.topology import load_topology
from acklab.plan.checks import Evidence
from acklab.plan.explore import ExploreSpace, Search
from acklab.store.runs import ExplorationDir, RunDir, write_json

log = logging.getLogger(__name__)

Execute = Callable[[dict[str, Any]], tuple[RunDir, Verdict]]
"""Runs params end to end: the run folder and its verdict (`acklab.orchestration.pipeline`)."""

MAX_REFUSED = 200  # draws the planner refuses in a row before the space is called too narrow
MAX_ERRORS = 3  # trials that end without a verdict in a row before the exploration stops
SHRINK_RUNS = 3  # shrinking runs per finding (after the confirming one)
EXCERPT_LINES = 12


@dataclass
class Trial:
    """One trial: its params (a heavier variant of trial `varies`, or drawn), the run, its status, its
    red scenarios (or why it did not run), and whether its faults reached its client (`reached`: kept
    for heavier variants)."""

    number: int
    params: dict[str, Any]
    varies: int | None = None
    run_id: str | None = None
    status: str | None = None
    red: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    reached: bool = False


@dataclass
class Finding:
    """A red row and what became of it: confirmed (red again alone, with its negative controls) and
    shrunk into a repro folder with a report, or not confirmed; the known bugs it shows."""

    number: int
    trial: int
    run_id: str
    scenario: str
    fingerprint: str
    summary: str
    known: list[dict[str, str]]
    failed: list[str] = field(default_factory=list)  # the expectations it failed: `suite: expects`
    confirmed: bool = False
    why_not: str | None = None
    repro: str | None = None
    report: str | None = None
    seen_again: list[int] = field(default_factory=list)


def checked_space(
    source: str, topology: str, clients: list[str] | None = None, client_versions: list[str] | None = None,
    kafka_versions: list[str] | None = None, profiles: list[str] | None = None, faults: list[str] | None = None,
) -> ExploreSpace:
    """The space a user chose (`clients` and confluent-kafka's `client_versions` together; empty: the
    defaults), checked before anything runs: SpecError in one line naming `source` if a value is
    refused, a client or Kafka version is not set up, or a profile does not run on a client."""
    from acklab.plan.planner import librdkafka_clients, make_plan

    every_client = [*(clients or []), *librdkafka_clients(client_versions)]
    space = parse_model(ExploreSpace, {
        "topology": topology, **({"clients": every_client} if every_client else {}),
        **({"kafka_versions": kafka_versions} if kafka_versions else {}), "profiles": profiles or [], "faults": faults or [],
    }, source)
    for client in space.clients:
        for kafka in space.kafka_versions:
            make_plan({
                "topology": space.topology, "client": client, "kafka_version": kafka, "profiles": space.profile_pool(), "faults": ["none"],
                "negative_control": False,
            })
    return space


CLIENT_TROUBLE = ("txretries", "txerrs", "req_timeouts", "disconnects")  # client statistics counters (Java's named in store.schemas)
WRITES_REFUSED = (  # fault counts of writes the proxy answered with an error or left unanswered
    "injected_errors", "injected_topic_errors", "dropped_requests", "dropped_responses", "blackholed_requests", "blackholed_responses",
    "lost_requests", "held_requests", "stalled_writes",
)


def reached(run: RunDir) -> bool:
    """Whether the faults reached a client of the run's scenarios (its negative controls apart): the
    client retried, met a request error, a timeout or a disconnect (its statistics: librdkafka counts
    no retry of a write its partition answered with an error), or the proxy answered its writes with
    an error or left them unanswered (the faults' counts)."""
    for entry in run.read_manifest().scenarios:
        if entry.control:
            continue
        if any(int(entry.producer_stats.get(counter) or 0) > 0 for counter in CLIENT_TROUBLE):
            return True
        if any(record.counts.get(count, 0) > 0 for record in entry.fault_timeline for count in WRITES_REFUSED):
            return True
    return False


def fingerprint(row: ScenarioVerdict, client: str, known: list[dict[str, str]]) -> str:
    """What makes two red rows one finding: the known bug they show, else the client and the
    expectations failed (and the fatal error's name)."""
    if known:
        return "known: " + ", ".join(sorted(k["preset"] for k in known))
    fatal = re.findall(r"\b[A-Z][A-Z_]{3,}\b", row.fatal_error or "")[:1]
    return f"{client}: " + ", ".join(sorted({f.expects for f in row.failed} | set(fatal)))


def explore(
    space: ExploreSpace, seed: int, budget_s: float, execute: Execute, *, folder: ExplorationDir | None = None,
    shrink_runs: int = SHRINK_RUNS, on_trial: Callable[[Trial], None] | None = None,
) -> dict[str, Any]:
    """Explore `space` (`checked_space`'s) with `seed` for `budget_s` seconds; the summary (also
    `exploration.json` in `folder`, a new one by default). `execute` raises SpecError, running
    nothing, for params the planner refuses: such a draw is drawn again."""
    from acklab.cluster import links

    topology = load_topology(space.topology)
    folder = folder or ExplorationDir.create(seed)
    started = time.monotonic()
    found: list[Finding] = []
    done: list[Trial] = []
    refused = errors = 0
    summary: dict[str, Any] = {}

    def write(status: str) -> None:
        summary.update(
            status=status, seed=seed, budget_s=budget_s, space=space.model_dump(), elapsed_s=round(time.monotonic() - started, 1),
            trials=len(done), scenarios=sum(len(t.params["profiles"]) for t in done if t.run_id), refused_draws=refused,
            findings=[asdict(f) for f in found], trial_log=[asdict(t) for t in done], folder=str(folder.root),
        )
        write_json(folder.summary, summary)

    def loop() -> None:
        nonlocal refused, errors
        search = Search(space, seed, topology.partitions, topology.broker_ids, links.unavailable() is None)
        while time.monotonic() - started < budget_s:
            params, varies = search.next()
            trial = Trial(len(done) + 1, params, varies)
            began = time.monotonic()
            try:
                run, verdict = execute(params)
            except SpecError as exc:  # the planner refused the draw (two process faults overlapping, say): nothing ran
                refused += 1
                if refused > MAX_REFUSED and not done:
                    raise SpecError(f"explore: the space yields no trial the planner takes ({exc})") from None
                continue
            except Exception as exc:  # a trial without a verdict is recorded; the next one runs
                trial.error, trial.seconds = f"{type(exc).__name__}: {exc}"[:500], round(time.monotonic() - began, 1)
                done.append(trial)
                errors += 1
                log.warning("trial %d ended without a verdict: %s", trial.number, trial.error)
                if errors >= MAX_ERRORS:
                    raise RuntimeError(f"explore: {errors} trials in a row ended without a verdict; the last: {trial.error}") from None
                continue
            errors = 0
            trial.run_id, trial.status, trial.seconds = run.run_id, verdict.status, round(time.monotonic() - began, 1)
            trial.red = [s.scenario for s in verdict.checked if s.status == "fail"]
            trial.reached = reached(run)
            search.observe(trial.number, params, trial.reached)
            done.append(trial)
            log.info("trial %d (%s): %s%s", trial.number, f"heavier than trial {varies}" if varies else "drawn", verdict.status,
                     ", its faults reached the client" if trial.reached else "")
            if on_trial is not None:
                on_trial(trial)
            for row in (s for s in verdict.checked if s.status == "fail"):
                _found(row, run, trial, found, folder, execute, shrink_runs)
            write("running")

    try:
        loop()
    except BaseException:  # a killed or failed exploration says so in its summary
        write("stopped")
        raise
    write("done")
    return summary


def _found(row: ScenarioVerdict, run: RunDir, trial: Trial, found: list[Finding], folder: ExplorationDir, execute: Execute, shrink_runs: int) -> None:
    """Record a red row: seen again if its fingerprint is a finding's, else confirmed, shrunk and reported."""
    from acklab.orchestration.repro import repro
    from acklab.plan.presets import known_bugs

    manifest = run.read_manifest()
    entry = next(e for e in manifest.scenarios if e.scenario == row.scenario)
    matrix_row = next(r for r in run.read_matrix() if r["scenario"] == row.scenario)
    known = known_bugs(Evidence(matrix_row, entry, run, manifest.kafka_version))
    client = f"{entry.client_family}:{entry.client_version}"
    key = fingerprint(row, client, known)
    same = next((f for f in found if f.fingerprint == key), None)
    if same is not None:
        same.seen_again.append(trial.number)
        return
    failed = sorted({f"{f.suite}: {f.expects}" for f in row.failed} | ({f"fatal: {row.fatal_error}"} if row.fatal_error else set()))
    finding = Finding(len(found) + 1, trial.number, run.run_id, row.scenario, key, row.summary_line(), known, failed)
    found.append(finding)
    try:
        made = repro(run, row.scenario, shrink_runs=shrink_runs, execute=execute, overrides={"negative_control": True})
    except SpecError as exc:
        finding.why_not = str(exc)
        return
    except Exception as exc:  # a confirming or shrinking run without a verdict: the finding stays unconfirmed, the search goes on
        finding.why_not = f"a confirming or shrinking run ended without a verdict: {type(exc).__name__}: {exc}"[:500]
        log.warning("finding %d: %s", finding.number, finding.why_not)
        return
    status = made.red_run.read_result().get("status")
    if status == "invalid":
        finding.why_not = f"red again, but a negative control of run {made.red_run.run_id} was not caught: the run proves nothing"
        return
    finding.confirmed, finding.repro = True, str(made.folder)
    report = folder.report(finding.number)
    report.write_text(maintainer_report(finding, made.folder, made.params, made.steps))
    finding.report = str(report)


def maintainer_report(finding: Finding, repro: Path, params: dict[str, Any], steps: list[str]) -> str:
    """A report a maintainer can act on: title, versions, minimal properties, the schedule, what was
    expected and what happened, evidence excerpts, the repro folder."""
    from acklab.workload import families

    versions = json.loads((repro / "versions.json").read_text())
    family, _, _ = versions["client"].partition(" ")
    config = repro / families.named(family).config_file
    verdict = (repro / "verdict.txt").read_text().strip()
    schedule = json.loads((repro / "schedule.json").read_text())
    expectations = "\n".join(f"- {_documented(line)}" for line in finding.failed) or "- (see verdict.txt)"
    known = "\n".join(
        f"- **Known bug**: [{k['preset']}]({k['tracker']}), {k['state']} upstream (acklab's bug library): {k['measured']}" for k in finding.known
    ) or "- **No known bug of acklab's library matches it**: possibly new; search the tracker before filing."
    ran = schedule + [{}] * len(params.get("schedule") or [])
    steps_text = "\n".join(
        f"| {step.get('at_s', '')} | {step.get('duration_s', '')} | {step['fault']} | {record.get('target') or step.get('target', '')} | "
        f"{json.dumps(step.get('options') or {})} | {record.get('effect', '')} |"
        for step, record in zip(params.get("schedule") or [], ran, strict=False)
    )

    def excerpt(name: str) -> str:
        text = (repro / name).read_text(errors="replace").splitlines() if (repro / name).exists() else []
        return "\n".join(text[:EXCERPT_LINES]) or "(none)"

    title = f"{versions['client']} on Kafka {versions['kafka']}: {finding.scenario} went red ({finding.fingerprint})"
    return f"""# {title}

{known}
- Found by `acklab explore`, trial {finding.trial} (run {finding.run_id}); confirmed alone with its negative controls, then shrunk:
{chr(10).join('  - ' + s for s in steps)}

## Versions
- Kafka {versions['kafka']} (KRaft, 3 brokers: `{repro / 'topology.yaml'}`, broker config `{repro / 'server.properties'}`)
- client {versions['client']}{' (librdkafka ' + versions['librdkafka'] + ')' if versions.get('librdkafka') else ''}
- acklab {versions.get('acklab')}

## Producer properties (minimal: the profile as run)
```
{config.read_text().strip() if config.exists() else '(see the repro folder)'}
```

## Load and fault schedule
{params['messages']} messages at {params.get('rate') or 'full'} msg/s, {params.get('producers', 1)} producer(s), {params.get('message_bytes', 100)}-byte values.

| at (s) | for (s) | fault | target | options | what it did |
|---|---|---|---|---|---|
{steps_text}

## Expected and observed
{verdict}

What was expected and failed (acklab's guarantee model, docs/guarantees.md):
{expectations}

## Evidence excerpts
Records (`records.txt`):
```
{excerpt('records.txt')}
```
Client log (`client.log`):
```
{excerpt('client.log')}
```
Broker log (`broker.log`):
```
{excerpt('broker.log')}
```

## Reproduce
`{repro / 'run.sh'}` (exits 1 while the bug is there); the folder holds the params, configs, schedule and evidence.
"""


def _documented(failed: str) -> str:
    """A failed expectation `suite: expects` with its claim's scope and reason, when the suite is a
    claim of the guarantee registry (`acklab.model.claims`)."""
    from acklab.model.claims import claim

    suite, _, expects = failed.partition(": ")
    try:
        found = claim(suite)
    except KeyError:
        return f"`{expects}` ({suite})"
    return f"`{expects}` ({suite}, {found.kind.value}: {found.text}) applies when {found.scope.when}"

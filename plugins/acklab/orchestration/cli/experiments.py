"""`acklab run`, `repro`, `audit` and `report`: experiments and their results."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer

from acklab.base.paths import runs_dir
from acklab.nemesis.faults import FAULT_NAMES
from acklab.orchestration.cli.common import (
    DEFAULTS,
    ExitCode,
    UserError,
    console,
    log_to_console,
    print_result,
    run_failures,
    user_errors,
    writable_file,
    writable_runs,
)
from acklab.plan.presets import with_preset
from acklab.plan.requests import RunRequest
from acklab.store.runs import ComparisonDir, RunDir, latest_result


def run(
    ctx: typer.Context,
    preset: Annotated[str | None, typer.Option(help="run a named preset (see `acklab presets`); only --presets-file, --kafka-version, --client, --client-version, --backend, --json and --junit combine with it")] = None,
    presets_file: Annotated[str | None, typer.Option("--presets-file", help="the presets file naming --preset: your own (YAML, as the catalog's; docs/checks.md), a path or a NAME in $ACKLAB_PRESETS_DIR; default: the catalog's")] = None,
    params_file: Annotated[Path | None, typer.Option("--params", help="a JSON/YAML file of run params, as a DAG's conf (e.g. an `acklab repro` folder's params.json); only --json and --junit combine with it")] = None,
    topology: Annotated[str, typer.Option(help="topology name in clusters/ or a YAML path")] = DEFAULTS.topology,
    profile: Annotated[list[str] | None, typer.Option(help=f"producer profile (repeatable; default: {', '.join(DEFAULTS.profiles)})")] = None,
    fault: Annotated[list[str] | None, typer.Option(help=f"fault name (repeatable; default: {', '.join(DEFAULTS.faults)}): {', '.join(FAULT_NAMES)}")] = None,
    schedule: Annotated[Path | None, typer.Option(help="YAML/JSON fault schedule (list of {at_s, fault, target, duration_s, options, before_load}); replaces --fault")] = None,
    messages: Annotated[int, typer.Option(help="messages per scenario")] = DEFAULTS.messages,
    rate: Annotated[float, typer.Option(help="messages per second (0 = as fast as possible)")] = DEFAULTS.rate or 0,
    duration_s: Annotated[float | None, typer.Option(help="stop each load after this many seconds (--messages is then a cap)")] = None,
    message_bytes: Annotated[int, typer.Option(help="bytes per message value")] = DEFAULTS.message_bytes,
    keys: Annotated[int, typer.Option(help="keys per producer")] = DEFAULTS.keys,
    producers: Annotated[int, typer.Option(help="producer processes per scenario")] = DEFAULTS.producers,
    topics: Annotated[int, typer.Option(help="topics each scenario's load spreads over (key k to topic k mod topics; records in the wrong one are misdirected)")] = DEFAULTS.topics,
    partitioner: Annotated[str | None, typer.Option(help="consistent_random or murmur2_random (default: the profile's)")] = None,
    kafka_version: Annotated[list[str] | None, typer.Option(help="override the topology's Kafka version (repeatable: a version comparison)")] = None,
    client: Annotated[list[str] | None, typer.Option(help="producer client FAMILY:VERSION, e.g. java:3.9.1 or librdkafka:2.16.1 (repeatable: a comparison)")] = None,
    client_version: Annotated[list[str] | None, typer.Option(help="confluent-kafka version of the producers, default the locked one (repeatable: a version comparison)")] = None,
    producer_config: Annotated[Path | None, typer.Option(help="your Java producer.properties, run as profile `custom` on the Java client")] = None,
    profiles_file: Annotated[Path | None, typer.Option(help="YAML of your own profiles (the catalog's schema; a profile may be {librdkafka: {property: value}}); --profile may name them, default: all of them")] = None,
    librdkafka: Annotated[list[str] | None, typer.Option(help="PROPERTY=VALUE of one raw librdkafka producer, profile `custom` (repeatable)")] = None,
    backend: Annotated[str, typer.Option(help="local (JVMs) or docker (containers)")] = DEFAULTS.backend,
    fault_at_s: Annotated[float, typer.Option(help="seconds into the load when the fault starts")] = DEFAULTS.fault_at_s,
    fault_duration_s: Annotated[float, typer.Option(help="seconds the fault lasts")] = DEFAULTS.fault_duration_s,
    standard: Annotated[bool, typer.Option("--standard", help="the daily DAG's standard matrix (every profile x every fault)")] = False,
    processing: Annotated[list[str] | None, typer.Option(help="pipeline scenarios: processing style (repeatable): eos, at-least-once, at-most-once, eos-naive (a planted bug); with faults such as processor-kill and zombie")] = None,
    processors: Annotated[int, typer.Option(help="processor instances per pipeline (separate processes, one consumer group)")] = DEFAULTS.processors,
    input_profile: Annotated[str, typer.Option(help="the producer profile writing a pipeline's input topic (not transactional)")] = DEFAULTS.input_profile,
    group_protocol: Annotated[str, typer.Option(help="the processors' consumer group protocol: classic or consumer (KIP-848)")] = DEFAULTS.group_protocol,
    consumer_property: Annotated[list[str] | None, typer.Option(help="NAME=VALUE of the processors' consumers, in their client's names (repeatable; timings, sizes, counts only)")] = None,
    processor_producer_property: Annotated[list[str] | None, typer.Option(help="NAME=VALUE of the processors' producers (repeatable; timings, sizes, counts, retries, acks, compression only)")] = None,
    one_at_a_time: Annotated[bool, typer.Option(help="one scenario at a time instead of a fault's profiles side by side")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the results as one JSON object on stdout: status, controls, each row with its verdict and failed expectations (docs/evidence.md)")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="also write the results as JUnit XML to this file (every run folder has its junit.xml)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also show the libraries' logging (always in the run's run.log)")] = False,
) -> None:
    """Run scenarios (profiles x faults) end to end and print the delivery matrix; exit 0 if all pass,
    1 fail, 2 bad input, 3 incomplete, 4 invalid (a negative control not caught), 5 no verdict (the run failed).

    Without --profile and --fault: leader-ack and idempotent under leader-kill. Several
    --kafka-version and/or --client (--client-version) values run the same scenarios on every (Kafka,
    client) pair and print the comparison, scenarios whose verdict differs first."""
    from acklab.plan.planner import version_grid

    log_to_console(verbose)
    request = RunRequest(  # typer ships its own click: compare a parameter's source by name
        given=tuple(name for name in ctx.params if ctx.get_parameter_source(name).name != "DEFAULT"),
        preset=preset, presets_file=presets_file, params_file=params_file, topology=topology, profile=profile, fault=fault, schedule=schedule, messages=messages,
        rate=rate, duration_s=duration_s, message_bytes=message_bytes, keys=keys, producers=producers, topics=topics, partitioner=partitioner,
        kafka_version=kafka_version, client=client, client_version=client_version, producer_config=producer_config,
        profiles_file=profiles_file, librdkafka=librdkafka, backend=backend, fault_at_s=fault_at_s, fault_duration_s=fault_duration_s,
        standard=standard, one_at_a_time=one_at_a_time, processing=processing, processors=processors, input_profile=input_profile,
        group_protocol=group_protocol, consumer_property=consumer_property, processor_producer_property=processor_producer_property,
    )

    def plan() -> Any:
        grid = request.grid()
        writable_runs()
        if junit is not None:
            writable_file(junit, "--junit")
        plans = version_grid(grid.params, grid.kafka_versions, grid.clients, minimum=1)
        if junit is not None:  # the input is good: an earlier file there must not pass for this run's results if it ends without any
            junit.unlink(missing_ok=True)
        return plans

    plans = user_errors(plan)
    results = [_run_one(plan, err=as_json) for plan in plans]
    if len(plans) == 1:
        run = results[0].run
        _publish(run.results_json, run.junit_xml, as_json, junit)
        raise typer.Exit(ExitCode.of(results[0].verdict.status))
    from acklab.report.compare import build_comparison

    comparison = build_comparison([result.run.root for result in results])
    for line in comparison.summary_lines():
        typer.echo(line, err=as_json)
    typer.echo(f"comparison: {comparison.html}", err=as_json)
    folder = ComparisonDir(comparison.html.parent)
    _publish(folder.results_json, folder.junit_xml, as_json, junit)
    raise typer.Exit(ExitCode.of(comparison.status))


def _publish(results_json: Path, junit_xml: Path, as_json: bool, junit: Path | None) -> None:
    """The results object on stdout (`as_json`: stdout then holds that one JSON document), the JUnit XML copied to `junit`."""
    if as_json:
        typer.echo(results_json.read_text().rstrip())
    if junit is not None:
        shutil.copyfile(junit_xml, junit)
        console.print(f"junit: {junit}", highlight=False)


def _run_one(plan: Any, err: bool = False) -> Any:
    """Run one plan end to end with progress bars; print its verdicts and matrix (on stderr if `err`:
    stdout is then kept for the results' JSON)."""
    from acklab.orchestration.pipeline import run_pipeline, write_result
    from acklab.orchestration.progress_bars import LoadBars
    from acklab.workload import families

    console.print(f"Kafka {plan.topology.kafka_version}, {families.of(plan.client).label(plan.client)}")
    run = RunDir.create()
    run.write_plan(plan)
    everything = logging.FileHandler(run.log)
    everything.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(everything)
    try:
        with LoadBars([(plan.group_label(g), len(g) * plan.load_of(g).messages) for g in plan.groups()], console) as bars:
            result = run_failures(lambda: user_errors(lambda: run_pipeline(plan, run, progress=bars)))
    finally:
        logging.getLogger().removeHandler(everything)
        everything.close()
    summary = write_result(result.run, result.verdict, drawing=result.drawing)
    for line in result.verdict.summary_lines():
        console.print(line, highlight=False)
    print_result(result.run, summary, err=err, control=False)  # its line opened the verdicts above
    return result


def repro(
    run_id: Annotated[str | None, typer.Argument(help="the run with the red row (a folder name in runs/)")] = None,
    scenario: Annotated[str | None, typer.Argument(help="the red row's scenario")] = None,
    preset: Annotated[str | None, typer.Option(help="instead: run this bug preset and reproduce its first red row")] = None,
    kafka_version: Annotated[str | None, typer.Option(help="with --preset: the Kafka version")] = None,
    client: Annotated[str | None, typer.Option(help="with --preset: the client FAMILY:VERSION")] = None,
    shrink_runs: Annotated[int, typer.Option(help="at most this many shrinking runs (0: no shrinking)")] = 6,
) -> None:
    """Write a folder a maintainer runs with one command from a red row (or a bug preset's): its
    configs, fault schedule, versions, affected records and log lines; shrunk first (fewer messages,
    a shorter fault, fewer fault steps) while it stays red."""
    from acklab.orchestration.pipeline import run_pipeline, write_result
    from acklab.orchestration.repro import repro as make_repro
    from acklab.plan.planner import make_plan

    log_to_console()

    def execute(params: dict[str, Any]) -> tuple[RunDir, Any]:
        plan = make_plan(params)
        console.print(f"run: {plan.scenarios[-1].name}, {params['messages']} messages", highlight=False)
        result = run_failures(lambda: run_pipeline(plan))
        write_result(result.run, result.verdict, drawing=result.drawing)
        for line in result.verdict.summary_lines():
            console.print(line, highlight=False)
        return result.run, result.verdict

    def target() -> tuple[RunDir, str]:
        if preset is not None:
            if run_id is not None:
                raise UserError("give a run and scenario, or --preset, not both")
            chosen = {k: v for k, v in {"kafka_version": kafka_version, "client": client}.items() if v}
            run, verdict = execute(with_preset(preset, chosen))
            red = [s.scenario for s in verdict.checked if s.status == "fail"]
            if not red:
                raise UserError(f"preset {preset} is green on these versions (run {run.run_id}): nothing to reproduce")
            return run, red[0]
        if run_id is None or scenario is None:
            raise UserError("give RUN_ID and SCENARIO (acklab repro 20261125T... txn__leader-kill), or --preset NAME")
        run = RunDir(runs_dir() / run_id)
        if not run.manifest.is_file():
            raise UserError(f"no run {run_id} in {runs_dir()}")
        return run, scenario

    run, name = user_errors(target)
    found = user_errors(lambda: make_repro(run, name, shrink_runs=shrink_runs, execute=execute))
    for step in found.steps:
        typer.echo(f"  {step}")
    typer.echo(f"runs: {found.runs} (1 to confirm it alone, {found.runs - 1} shrinking)")
    typer.echo(f"smallest red: {found.params['messages']} messages; run {found.red_run.run_id}")
    typer.echo(f"repro: {found.folder} (run it: {found.folder / 'run.sh'})")


def audit(
    run: Annotated[Path, typer.Argument(help="the run folder (runs/<id>)")],
    out: Annotated[Path | None, typer.Option(help="where the audit's outputs go (a new folder; default: the run's audit/)")] = None,
    from_archive: Annotated[bool, typer.Option(help="audit the run's archived topic records instead of reading Kafka")] = False,
    master: Annotated[str | None, typer.Option(help="Spark master URL (default: $ACKLAB_SPARK_MASTER or local[*])")] = None,
) -> None:
    """(Re-)audit a run with Spark: the same job and arguments as the DAG's audit task; print matrix.json's path."""
    from acklab.checker.submit import AuditError, audit_job, submit
    from acklab.store.runs import AuditDir

    def job() -> Any:
        if not (run / "manifest.json").is_file():
            raise UserError(f"{run}: no manifest.json (not a run folder)")
        archive = RunDir(run).audit.topic_records
        if from_archive and not archive.exists():  # a Parquet dataset: a folder
            raise UserError(f"{archive}: no archived topic records (the run was never audited)")
        return audit_job(RunDir(run), AuditDir(out) if out else None, archive if from_archive else None)

    try:
        typer.echo(submit(user_errors(job), master))
    except AuditError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None


def report(require_pass: Annotated[bool, typer.Option(help="exit with the run's code (`acklab run`'s: 1 fail, 3 incomplete, 4 invalid) unless it passed")] = False) -> None:
    """Print the status, matrix and Data Docs report of the most recent validated run."""
    run = latest_result()
    if run is None:
        console.print(f"no validated run in {runs_dir()}")
        raise typer.Exit(1)
    result = run.read_result()
    print_result(run, result)
    if require_pass and result["status"] != "pass":
        raise typer.Exit(ExitCode.of(result["status"]))


def explore(
    budget_minutes: Annotated[float, typer.Option(help="stop starting trials after this many minutes (at most a week)")],
    seed: Annotated[int, typer.Option(help="the seed: the same seed and options draw the same trials")],
    client: Annotated[list[str] | None, typer.Option(help="client FAMILY[:VERSION] a trial may draw (repeatable; default: the locked confluent-kafka)")] = None,
    client_version: Annotated[list[str] | None, typer.Option(help="confluent-kafka version a trial may draw (repeatable; shorthand of --client librdkafka:V)")] = None,
    kafka_version: Annotated[list[str] | None, typer.Option(help="Kafka version a trial may draw (repeatable; default: the topology's)")] = None,
    profile: Annotated[list[str] | None, typer.Option(help="catalog profile a trial may draw and re-tune (repeatable; default: every one)")] = None,
    fault: Annotated[list[str] | None, typer.Option(help="catalog fault a trial may draw (repeatable; default: every one acting on producers)")] = None,
    topology: Annotated[str, typer.Option(help="topology name in clusters/ of every trial")] = DEFAULTS.topology,
    shrink_runs: Annotated[int, typer.Option(help="shrinking runs per finding, after the confirming one")] = 3,
) -> None:
    """Search for violations nobody scripted: trials drawn from the fault catalog, the profiles and the
    versions (fault mixes, overlaps, targets, timings, rates, producers, re-tuned batching) until the
    budget is spent; each red row confirmed alone with the negative controls, shrunk with `acklab
    repro`, labelled with the known bug it shows, and written as a maintainer-ready report. Exit 0 if
    nothing was found, 1 if a finding was confirmed, 2 bad input."""
    from acklab.orchestration.explore import checked_space
    from acklab.orchestration.explore import explore as run_exploration
    from acklab.orchestration.pipeline import run_pipeline, write_result
    from acklab.plan.explore import check_budget
    from acklab.plan.planner import make_plan
    from acklab.store.runs import ExplorationDir

    log_to_console()

    def space() -> Any:
        check_budget(budget_minutes)
        if shrink_runs < 0:
            raise UserError(f"--shrink-runs {shrink_runs}: give 0 or more")
        found = checked_space("explore", topology, client, client_version, kafka_version, profile, fault)
        writable_runs()
        return found

    chosen = user_errors(space)

    def execute(params: dict[str, Any]) -> tuple[RunDir, Any]:
        steps = ", ".join(f"{s['fault']} {s.get('target', '')} at {s['at_s']} s for {s['duration_s']} s" for s in params.get("schedule") or [])
        console.print(f"run: {', '.join(params['profiles'])} on {params.get('client')}; {steps}; {params['messages']} at {params['rate']:g}/s", highlight=False)
        plan = make_plan(params)  # a refused candidate is a SpecError: not red, and no run
        result = run_failures(lambda: run_pipeline(plan))
        write_result(result.run, result.verdict, drawing=result.drawing)
        for line in result.verdict.summary_lines():
            console.print(line, highlight=False)
        return result.run, result.verdict

    folder = ExplorationDir.create(seed)
    console.print(f"exploring for {budget_minutes:g} min with seed {seed}: {folder.root}", highlight=False)
    summary = user_errors(lambda: run_exploration(chosen, seed, budget_minutes * 60, execute, folder=folder, shrink_runs=shrink_runs))
    confirmed = [f for f in summary["findings"] if f["confirmed"]]
    typer.echo(f"{summary['trials']} trials ({summary['scenarios']} scenarios) in {summary['elapsed_s'] / 60:.1f} min; {len(confirmed)} confirmed finding(s)")
    for finding in summary["findings"]:
        what = f"report {finding['report']}" if finding["confirmed"] else f"not confirmed: {finding['why_not']}"
        labels = ", ".join(f"{k['preset']} ({k['tracker']})" for k in finding["known"]) or "no known bug"
        typer.echo(f"  finding {finding['number']} (trial {finding['trial']}, {finding['scenario']}): {labels}; {what}")
    typer.echo(f"exploration: {folder.summary}")
    raise typer.Exit(1 if confirmed else 0)

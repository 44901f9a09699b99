"""`acklab` command line: the same scenarios as the DAG, without Airflow.

A user's mistake (bad spec, missing jars, unwritable run store, ...) is one line on stderr and exit
code 2, before any broker starts; a run ends 0 only when every scenario passed."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from acklab.base import maven
from acklab.base.paths import runs_dir
from acklab.base.spec import SpecError, load_yaml
from acklab.model import beliefs
from acklab.nemesis.faults import FAULT_NAMES
from acklab.plan.params import RunParams, standard_matrix
from acklab.plan.presets import VERSIONED, with_preset
from acklab.plan.presets import describe as describe_claim
from acklab.store.runs import RunDir, latest_result

app = typer.Typer(
    help="acklab: prove or refute Kafka delivery guarantees on real clusters.", no_args_is_help=True, pretty_exceptions_enable=False
)
docker_app = typer.Typer(help="The Docker backend's engine and image.", no_args_is_help=True)
app.add_typer(docker_app, name="docker")
airflow_app = typer.Typer(help="The Airflow stack: api-server, scheduler, dag-processor (LocalExecutor).", no_args_is_help=True)
app.add_typer(airflow_app, name="airflow")
console = Console(stderr=True, soft_wrap=True)
DEFAULTS = RunParams()
MATRIX_COLUMNS = ("scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered")
T = TypeVar("T")


class UserError(Exception):
    """A mistake in what the user asked for: one line, exit code 2."""


def user_errors(action: Callable[[], T]) -> T:
    """Run `action`; a user's mistake becomes one line on stderr and exit code 2."""
    try:
        return action()
    except (SpecError, maven.SetupError, UserError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None


def run_failures(action: Callable[[], T]) -> T:
    """Run `action`; a run that fails (a full disk, a cluster that would not start, a producer that
    died...) is one line on stderr with where its traceback went, and exit code 1: no verdict."""
    try:
        return action()
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as exc:  # every failure of a run ends it the same way
        trace = Path(tempfile.mkstemp(prefix="acklab-run-failure-", suffix=".log")[1])
        trace.write_text(traceback.format_exc())
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        console.print(f"[red]error:[/red] the run failed, no verdict ({type(exc).__name__}: {first}); traceback: {trace}", highlight=False)
        raise typer.Exit(1) from None


def _writable_runs() -> None:
    """The run store must be a writable folder (created if missing)."""
    root = runs_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"ACKLAB_RUNS={root}: cannot create the run store ({exc.strerror})") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"ACKLAB_RUNS={root}: the run store is not writable")


@app.command()
def setup(
    kafka_version: Annotated[list[str], typer.Option(help="Kafka versions to fetch (3.3.x to 3.9.x, 4.x)")] = [maven.DEFAULT_KAFKA_VERSION],  # noqa: B006
    client_version: Annotated[list[str] | None, typer.Option(help="confluent-kafka versions to set up (2.0.2 or later), each in its own virtualenv")] = None,
    java_client_version: Annotated[list[str] | None, typer.Option(help="kafka-clients versions (3.x, 4.x) to fetch and build the Java producer driver against")] = None,
) -> None:
    """Fetch Kafka broker jars from Maven Central, and set up producer client versions of both
    families (idempotent)."""

    from acklab.cluster import class_archive
    from acklab.workload import families

    librdkafka, java = families.FAMILIES["librdkafka"], families.FAMILIES["java"]

    def fetch() -> None:
        for kafka in kafka_version:
            maven.kafka_artifacts(kafka)  # a bad version fails before any download
        for client in client_version or []:
            librdkafka.check_version(client)
        for client in java_client_version or []:
            java.check_version(client)
        for kafka in kafka_version:
            console.print(f"kafka {kafka}: {maven.fetch_kafka(kafka)}")
            console.print(f"kafka {kafka} class archive: {class_archive.dump(kafka) or 'none (nodes start without it)'}")
        for client in client_version or []:
            ready = librdkafka.fetch(client)
            console.print(f"{librdkafka.label(ready)}: {ready.python}")
        for client in java_client_version or []:
            console.print(f"{java.label(java.fetch(client))}: built")

    user_errors(fetch)


@app.command()
def run(
    ctx: typer.Context,
    preset: Annotated[str | None, typer.Option(help="run a named preset (see `acklab presets`); only --kafka-version, --client, --client-version, --backend and --json combine with it")] = None,
    params_file: Annotated[Path | None, typer.Option("--params", help="a JSON/YAML file of run params, as a DAG's conf (e.g. an `acklab repro` folder's params.json); only --json combines with it")] = None,
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
    one_at_a_time: Annotated[bool, typer.Option(help="one scenario at a time instead of a fault's profiles side by side")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the matrix rows as JSON")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also show the libraries' logging (always in the run's run.log)")] = False,
) -> None:
    """Run scenarios (profiles x faults) end to end and print the delivery matrix; exit 1 unless all pass.

    Without --profile and --fault: leader-ack and idempotent under leader-kill. Several
    --kafka-version and/or --client (--client-version) values run the same scenarios on every (Kafka,
    client) pair and print the comparison, scenarios whose verdict differs first."""
    from acklab.plan.planner import librdkafka_clients, version_grid

    _log_to_console(verbose)
    base = standard_matrix() if standard else DEFAULTS
    params: dict[str, Any] = {
        "topology": topology,
        "client_version": client_version,
        "profiles": profile or base.profiles,
        "faults": fault or base.faults,
        "schedule": None,
        "messages": base.messages if standard and messages == DEFAULTS.messages else messages,
        "rate": (base.rate if standard and rate == DEFAULTS.rate else rate) or None,
        "duration_s": duration_s,
        "message_bytes": message_bytes,
        "keys": keys,
        "producers": producers,
        "partitioner": partitioner,
        "backend": backend,
        "fault_at_s": fault_at_s,
        "fault_duration_s": fault_duration_s,
        "side_by_side": not one_at_a_time,
    }

    def plan() -> Any:
        nonlocal params
        if params_file is not None:
            if given := [name for name in ctx.params if name not in ("params_file", "as_json", "verbose") and ctx.get_parameter_source(name).name != "DEFAULT"]:
                raise UserError(f"--params fixes the run: --{given[0].replace('_', '-')} cannot be combined with it (only --json)")
            loaded = load_yaml(params_file, "params")
            if not isinstance(loaded, dict):
                raise UserError(f"{params_file}: expected a mapping of run params")
            _writable_runs()
            return version_grid(loaded, [loaded.pop("kafka_version", None)], [loaded.pop("client", None)], minimum=1)
        if preset is not None:
            combined = {"preset", "as_json", "verbose", *VERSIONED}
            # typer ships its own click: compare the source by name
            if given := [name for name in ctx.params if name not in combined and ctx.get_parameter_source(name).name != "DEFAULT"]:
                raise UserError(
                    f"--preset {preset} fixes the experiment: --{given[0].replace('_', '-')} cannot be combined with it "
                    "(only --kafka-version, --client, --client-version, --backend and --json)"
                )
            params = with_preset(preset, {"backend": backend})
        if schedule is not None:
            params["schedule"] = load_yaml(schedule, "schedule")
        clients = [*(client or []), *librdkafka_clients(client_version)]
        if standard and not clients and preset is None:  # both families, a group per fault and client, as the daily DAG
            params.update(clients=base.clients, clients_together=base.clients_together)
        custom = _custom_profiles(profiles_file, librdkafka)
        if producer_config is not None:
            custom["custom"] = {"java": _java_properties(producer_config, clients)}
            clients = clients or ["java"]
        if custom:
            params["custom_profiles"] = custom
            params["profiles"] = profile or list(custom)
        _writable_runs()
        return version_grid(params, kafka_version or [None], clients or [None], minimum=1)

    plans = user_errors(plan)
    results = [_run_one(plan, as_json and len(plans) == 1, err=as_json) for plan in plans]
    if len(plans) == 1:
        raise typer.Exit(0 if results[0].verdict.status == "pass" else 1)
    from acklab.report.compare import build_comparison

    comparison = build_comparison([result.run.root for result in results])
    for line in comparison.summary_lines():
        typer.echo(line, err=as_json)
    typer.echo(f"comparison: {comparison.html}", err=as_json)
    if as_json:
        typer.echo(json.dumps({run.label: list(run.rows.values()) for run in comparison.runs}, indent=2))
    raise typer.Exit(0 if comparison.status == "pass" else 1)


def _run_one(plan: Any, as_json: bool, err: bool = False) -> Any:
    """Run one plan end to end with progress bars; print its verdicts and matrix (its JSON on stdout
    if `as_json`; everything on stderr if `err`)."""
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
    if as_json:  # the matrix on stdout; the verdicts and the preset's claims stay on the console
        for seen in summary.get("observations", []):
            console.print(describe_claim(seen), highlight=False)
        typer.echo(json.dumps(result.run.read_matrix(), indent=2))
        console.print(f"matrix: {summary['matrix']}\nreport: {summary['report']}")
    else:
        _print_result(result.run, summary, err=err, control=False)  # its line opened the verdicts above
    return result


def _java_properties(path: Path, clients: list[str]) -> dict[str, str]:
    """The user's producer.properties as the Java client reads it (the first Java client named, else
    the Java family's default)."""
    from acklab.workload import families, java_client

    java = next((spec for spec in clients if spec.partition(":")[0] == java_client.NAME), java_client.NAME)
    try:
        target = java_client.client(families.parse(java)[1])
    except maven.SetupError as exc:
        raise UserError(f"--producer-config: {exc}") from None
    return java_client.read_properties(target, path)


def _custom_profiles(profiles_file: Path | None, librdkafka: list[str] | None) -> dict[str, Any]:
    """The user's profiles: a profiles file's, and `custom` from PROPERTY=VALUE pairs."""
    from acklab.workload.profiles import RAW, load_profiles_file

    custom = load_profiles_file(profiles_file) if profiles_file is not None else {}
    if librdkafka:
        pairs = [item.partition("=") for item in librdkafka]
        if bad := [key for key, sign, _ in pairs if not sign or not key]:
            raise UserError(f"--librdkafka {bad[0]!r}: expected PROPERTY=VALUE, e.g. acks=all")
        custom["custom"] = {RAW: {key.strip(): value.strip() for key, _, value in pairs}}
    return custom


@app.command()
def presets(
    as_json: Annotated[bool, typer.Option("--json", help="print them as JSON")] = False,
    bugs: Annotated[bool, typer.Option("--bugs", help="the known-bugs page: each bug preset, its tracker entry, the versions seen red and green, its last run")] = False,
) -> None:
    """List the presets: name, source and description (--bugs: the known bugs and what the run store saw of them)."""
    from acklab.plan.presets import PRESETS

    if bugs:
        _known_bugs(as_json)
        return
    summaries = [PRESETS[name].summary() for name in sorted(PRESETS)]
    if as_json:
        typer.echo(json.dumps(summaries, indent=2))
        return
    from rich.table import Table

    table = Table("name", "source", "description", title="presets")
    for summary in summaries:
        table.add_row(summary["name"], summary["source"], summary["description"])
    Console(width=160).print(table)


def _known_bugs(as_json: bool) -> None:
    from dataclasses import asdict

    from rich.table import Table

    from acklab.report.known_bugs import known_bugs, write_known_bugs

    found = known_bugs()
    page = write_known_bugs()
    if as_json:
        typer.echo(json.dumps([asdict(bug) for bug in found], indent=2))
        return
    table = Table("preset", "tracker entry", "red on", "green on", "last ran", title="known bugs")
    for bug in found:
        table.add_row(
            bug.preset, f"{bug.source}\n{bug.tracker}", "\n".join(bug.red) or "-", "\n".join(bug.green) or "-",
            f"{bug.last_ran} ({bug.runs} runs)" if bug.last_ran else "never",
        )
    Console(width=160).print(table)
    typer.echo(f"page: {page}")


@app.command()
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

    _log_to_console()

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


@app.command()
def check_params(
    dag_id: Annotated[str, typer.Argument(help="the DAG the params are for, e.g. kafka_delivery_matrix")],
    conf: Annotated[str, typer.Argument(help="the params as JSON, as for `airflow dags test -c`")] = "{}",
) -> None:
    """Check a DAG run's params as the trigger form and the `plan` task would, before any cluster
    starts: one line and exit code 2 if they are wrong."""
    from acklab.orchestration.dag_conf import check_dag_conf

    user_errors(lambda: check_dag_conf(dag_id, conf))
    typer.echo(f"{dag_id}: params ok")


@app.command()
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


@app.command()
def check_topology(name: str) -> None:
    """Validate a topology spec and print it."""
    from acklab.cluster.topology import load_topology

    typer.echo(user_errors(lambda: load_topology(name)).model_dump_json(indent=2))


@app.command()
def model_table(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/guarantees.md: the guarantee model's classes, rules and catalog rows."""
    from acklab.model.tables import DOC, default_tables, to_markdown

    _write_generated(DOC, to_markdown(default_tables()), check, "acklab model-table")


@app.command()
def evidence_doc(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/evidence.md: the run folder's layout, the manifest and every evidence schema."""
    from acklab.report.evidence_doc import DOC, to_markdown

    _write_generated(DOC, to_markdown(), check, "acklab evidence-doc")


def _write_generated(path: Path, text: str, check: bool, command: str) -> None:
    if check:
        current = path.exists() and path.read_text() == text
        console.print(f"{path}: {'current' if current else f'out of date; run `{command}`'}")
        raise typer.Exit(0 if current else 1)
    path.write_text(text)
    console.print(f"wrote {path}")


@app.command()
def report(require_pass: Annotated[bool, typer.Option(help="exit 1 unless the run passed")] = False) -> None:
    """Print the status, matrix and Data Docs report of the most recent validated run."""
    run = latest_result()
    if run is None:
        console.print(f"no validated run in {runs_dir()}")
        raise typer.Exit(1)
    result = run.read_result()
    _print_result(run, result)
    if require_pass and result["status"] != "pass":
        raise typer.Exit(1)


@app.command()
def reap(all_clusters: Annotated[bool, typer.Option("--all", help="also clusters whose owner may still be alive")] = False) -> None:
    """Tear down orphaned clusters (or every running one with --all) in the run store."""
    from acklab.cluster.backends import reap_all, reap_orphans

    reaped = (reap_all if all_clusters else reap_orphans)(runs_dir())
    console.print(f"reaped {len(reaped)} cluster(s)" + "".join(f"\n  {p}" for p in reaped))


@docker_app.command("engine")
def docker_engine(log: Annotated[Path, typer.Option(help="dockerd's log file")] = Path("/tmp/acklab-dockerd.log")) -> None:
    """Start Debian's dockerd (vfs storage, no iptables, no default bridge) unless an engine answers."""
    from acklab.cluster.docker_engine import EngineUnavailable, start

    try:
        process = start(log)
    except EngineUnavailable as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if process is None:
        typer.echo("a Docker engine is already answering")
    else:
        typer.echo(f"dockerd started (pid {process.pid}, log {log}); stop it with: kill {process.pid}")


@docker_app.command("image")
def docker_image(
    kafka_version: Annotated[str, typer.Option(help="the Kafka version whose jars go in")] = maven.DEFAULT_KAFKA_VERSION,
    context: Annotated[Path | None, typer.Option(help="write a `docker build` context here instead of importing")] = None,
) -> None:
    """Build the Kafka image for the Docker backend from host files; print its tag (for ACKLAB_KAFKA_IMAGE)."""
    from acklab.cluster import docker_image as image

    user_errors(lambda: maven.kafka_libs(kafka_version))
    if context is not None:
        image.write_context(kafka_version, context)
        typer.echo(context)
    else:
        typer.echo(image.build(kafka_version))


def _airflow_home() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow"))


@airflow_app.command("up")
def airflow_up(
    port: Annotated[int, typer.Option(help="the UI's port on 127.0.0.1 (0: any free one)")] = 8080,
    postgres: Annotated[bool, typer.Option(help="metadata DB on a project-local PostgreSQL instead of SQLite")] = False,
) -> None:
    """Start the stack in $AIRFLOW_HOME and print the UI's address and login."""
    from acklab.cluster.layout import free_ports
    from acklab.services import airflow_stack
    from acklab.services.processes import ServiceError

    home = _airflow_home()
    if (state := airflow_stack.running(home)) is not None:
        console.print(f"[red]error:[/red] the stack of {home} already runs at {state.url} (stop it: make airflow-stop)", highlight=False)
        raise typer.Exit(2)
    if port and not _port_free(port):
        console.print(f"port {port} is taken; using a free one", highlight=False)
        port = 0
    try:
        state = airflow_stack.start(home, port=port or free_ports(1)[0], use_postgres=postgres)
    except ServiceError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    typer.echo(f"Airflow UI: {state.url}  (metadata DB: {state.database})")
    typer.echo(f"login: {state.user} / {state.password}")
    typer.echo(f"logs: {home / 'logs'}; stop: make airflow-stop (acklab airflow down)")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@airflow_app.command("pool")
def airflow_pool_set() -> None:
    """Create (or update) the DAGs' pool in $AIRFLOW_HOME's metadata DB (`airflow pools set`)."""
    from acklab.services import airflow_pool

    subprocess.run([str(Path(sys.executable).parent / "airflow"), *airflow_pool.SET_ARGS], check=True, stdout=subprocess.DEVNULL)


@airflow_app.command("down")
def airflow_down() -> None:
    """Stop exactly the processes `acklab airflow up` started from $AIRFLOW_HOME."""
    from acklab.services import airflow_stack

    state = airflow_stack.stop_stack(_airflow_home())
    if state is None:
        typer.echo("no stack was started from this Airflow home")
    else:
        typer.echo(f"stopped: {', '.join(f'{p.name} ({p.pid})' for p in state.all_processes)}")


def _print_result(run: RunDir, result: dict[str, Any], err: bool = False, control: bool = True) -> None:
    """The matrix as a table with each scenario's verdict, then (if `control`) what the negative
    control showed, the status and the paths (on stderr if `err`: stdout is then kept for one JSON
    document)."""
    from functools import partial

    from rich.table import Table

    echo = partial(typer.echo, err=err)
    caught = "NOT caught" if result["status"] == "invalid" else "caught"  # the negative control's row
    table = Table(*MATRIX_COLUMNS, "verdict", title="delivery matrix")
    for row in run.read_matrix():
        table.add_row(*(str(row.get(c)) for c in MATRIX_COLUMNS), result["scenarios"].get(row["scenario"], caught))
    Console(width=160, stderr=err).print(table)
    for regression in result.get("regressions", []):
        echo(f"REGRESSION {regression['scenario']}: {regression['status']} now, passed in green run {regression['last_green_run']}")
    for lost in result.get("unverified", []):
        echo(f"NO LONGER VERIFIED {lost['scenario']}: incomplete now, passed in green run {lost['last_green_run']}")
    for item in result.get("beliefs", []):
        echo(beliefs.describe(item))
    for seen in result.get("observations", []):
        echo(describe_claim(seen))
    for line in result.get("control", []) if control else []:
        echo(line)
    echo(f"status: {result['status']}")
    echo(f"html report: {result['html']}")
    echo(f"matrix: {result['matrix']}")
    echo(f"report: {result['report']}")


def _log_to_console(verbose: bool = False) -> None:
    """INFO logging on the console: acklab's (and any library's errors) only, or everything if
    `verbose`. A run also logs everything to its `run.log`."""
    from rich.logging import RichHandler

    shown = RichHandler(console=console, show_path=False)
    if not verbose:
        shown.addFilter(lambda record: record.name.startswith("acklab") or record.levelno >= logging.ERROR)
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[shown])
    logging.getLogger("acklab.rdkafka").setLevel(logging.CRITICAL)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: every cluster, producer and fault of the run is undone on the way out


def main() -> None:
    """The `acklab` command; SIGTERM stops it like Ctrl-C, cleaning up what it started."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    app(prog_name="acklab")


if __name__ == "__main__":
    sys.exit(main())

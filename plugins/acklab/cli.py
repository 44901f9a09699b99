"""`acklab` command line: the same scenarios as the DAG, without Airflow."""

from __future__ import annotations

import json
import logging
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from acklab import maven
from acklab.cluster.state import reap_all, reap_orphans
from acklab.nemesis.catalog import FAULT_NAMES
from acklab.paths import RESULT_FILE, runs_dir
from acklab.progress_bars import LoadBars
from acklab.scenario import RunParams, standard_matrix
from acklab.topology import SpecError, load_topology

app = typer.Typer(help="acklab: prove or refute Kafka delivery guarantees on real clusters.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)
DEFAULTS = RunParams()
MATRIX_COLUMNS = ("scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered")


@app.command()
def setup(kafka_version: Annotated[list[str], typer.Option(help="Kafka versions to fetch")] = [maven.DEFAULT_KAFKA_VERSION]) -> None:  # noqa: B006
    """Fetch Kafka broker jars and the Spark Kafka connector from Maven Central (idempotent)."""
    for kafka in kafka_version:
        console.print(f"kafka {kafka}: {maven.fetch_kafka(kafka)}")
    spark = version("pyspark")
    console.print(f"spark kafka connector {spark}: {maven.fetch_spark_kafka(spark)}")


@app.command()
def run(
    topology: Annotated[str, typer.Option(help="topology name in clusters/ or a YAML path")] = DEFAULTS.topology,
    profile: Annotated[Optional[list[str]], typer.Option(help="producer profile (repeatable)")] = None,  # noqa: UP007
    fault: Annotated[Optional[list[str]], typer.Option(help=f"fault name (repeatable): {', '.join(FAULT_NAMES)}")] = None,  # noqa: UP007
    schedule: Annotated[Optional[Path], typer.Option(help="YAML/JSON fault schedule (list of {at_s, fault, target, duration_s, options}); replaces --fault")] = None,  # noqa: UP007
    messages: Annotated[int, typer.Option(help="messages per scenario")] = DEFAULTS.messages,
    rate: Annotated[float, typer.Option(help="messages per second (0 = as fast as possible)")] = DEFAULTS.rate or 0,
    duration_s: Annotated[Optional[float], typer.Option(help="stop each load after this many seconds (--messages is then a cap)")] = None,  # noqa: UP007
    message_bytes: Annotated[int, typer.Option(help="bytes per message value")] = DEFAULTS.message_bytes,
    keys: Annotated[int, typer.Option(help="keys per producer")] = DEFAULTS.keys,
    producers: Annotated[int, typer.Option(help="producer processes per scenario")] = DEFAULTS.producers,
    partitioner: Annotated[Optional[str], typer.Option(help="consistent_random or murmur2_random (default: the profile's)")] = None,  # noqa: UP007
    kafka_version: Annotated[Optional[str], typer.Option(help="override the topology's Kafka version")] = None,  # noqa: UP007
    fault_at_s: Annotated[float, typer.Option(help="seconds into the load when the fault starts")] = DEFAULTS.fault_at_s,
    fault_duration_s: Annotated[float, typer.Option(help="seconds the fault lasts")] = DEFAULTS.fault_duration_s,
    standard: Annotated[bool, typer.Option("--standard", help="the daily DAG's standard matrix (every profile x every fault)")] = False,
    one_at_a_time: Annotated[bool, typer.Option(help="one scenario at a time instead of a fault's profiles side by side")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the matrix rows as JSON")] = False,
) -> None:
    """Run scenarios (profiles x faults) end to end and print the delivery matrix; exit 1 unless all pass."""
    from acklab.pipeline import matrix_rows, run_pipeline, write_result
    from acklab.scenario import make_plan

    _log_to_console()
    base = standard_matrix() if standard else DEFAULTS
    params = {
        "topology": topology,
        "profiles": profile or base.profiles,
        "faults": fault or base.faults,
        "schedule": yaml.safe_load(schedule.read_text()) if schedule else None,
        "messages": base.messages if standard and messages == DEFAULTS.messages else messages,
        "rate": (base.rate if standard and rate == DEFAULTS.rate else rate) or None,
        "duration_s": duration_s,
        "message_bytes": message_bytes,
        "keys": keys,
        "producers": producers,
        "partitioner": partitioner,
        "kafka_version": kafka_version,
        "fault_at_s": fault_at_s,
        "fault_duration_s": fault_duration_s,
        "side_by_side": not one_at_a_time,
    }
    try:
        plan = make_plan(params)
        with LoadBars([(g[0].fault, len(g) * plan.load.messages) for g in plan.groups()], console) as bars:
            result = run_pipeline(params, progress=bars)
    except SpecError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    summary = write_result(result.matrix_json, result.verdict)
    for line in result.verdict.summary_lines():
        console.print(line)
    if as_json:
        typer.echo(json.dumps(matrix_rows(result.matrix_json), indent=2))
        console.print(f"matrix: {summary['matrix']}\nreport: {summary['report']}")
    else:
        _print_result(summary)
    raise typer.Exit(0 if result.verdict.status == "pass" else 1)


@app.command()
def check_topology(name: str) -> None:
    """Validate a topology spec and print it."""
    try:
        typer.echo(load_topology(name).model_dump_json(indent=2))
    except SpecError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


@app.command()
def model_table(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/guarantees.md: the guarantee model's classes, rules and catalog rows."""
    from acklab.model_table import DOC, default_tables, to_markdown

    text = to_markdown(default_tables())
    if check:
        current = DOC.exists() and DOC.read_text() == text
        console.print(f"{DOC}: {'current' if current else 'out of date; run `acklab model-table`'}")
        raise typer.Exit(0 if current else 1)
    DOC.write_text(text)
    console.print(f"wrote {DOC}")


@app.command()
def report(require_pass: Annotated[bool, typer.Option(help="exit 1 unless the run passed")] = False) -> None:
    """Print the status, matrix and Data Docs report of the most recent validated run."""
    results = sorted(runs_dir().glob(f"*/{RESULT_FILE}"), key=lambda p: p.stat().st_mtime)
    if not results:
        console.print(f"no validated run in {runs_dir()}")
        raise typer.Exit(1)
    result = json.loads(results[-1].read_text())
    _print_result(result)
    if require_pass and result["status"] != "pass":
        raise typer.Exit(1)


@app.command()
def reap(all_clusters: Annotated[bool, typer.Option("--all", help="also clusters whose owner may still be alive")] = False) -> None:
    """Tear down orphaned clusters (or every running one with --all) in the run store."""
    reaped = (reap_all if all_clusters else reap_orphans)(runs_dir())
    console.print(f"reaped {len(reaped)} cluster(s)" + "".join(f"\n  {p}" for p in reaped))


def _print_result(result: dict) -> None:
    """The matrix as a table with each scenario's verdict, then the status and the two paths."""
    table = Table(*MATRIX_COLUMNS, "verdict", title="delivery matrix")
    for row in json.loads(Path(result["matrix"]).read_text()):
        table.add_row(*(str(row[c]) for c in MATRIX_COLUMNS), result["scenarios"][row["scenario"]])
    Console(width=160).print(table)
    for regression in result.get("regressions", []):
        typer.echo(f"REGRESSION {regression['scenario']}: {regression['status']} now, passed in green run {regression['last_green_run']}")
    typer.echo(f"status: {result['status']}")
    typer.echo(f"html report: {result['html']}")
    typer.echo(f"matrix: {result['matrix']}")
    typer.echo(f"report: {result['report']}")


def _log_to_console() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[RichHandler(console=console, show_path=False)])
    logging.getLogger("acklab.rdkafka").setLevel(logging.CRITICAL)

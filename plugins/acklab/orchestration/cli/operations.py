"""`acklab setup`, `reap`, `docker ...` and `airflow ...`: the environment runs need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from acklab.base import maven
from acklab.base.paths import runs_dir
from acklab.orchestration.cli.common import (
    console,
    user_errors,
)

docker_app = typer.Typer(help="The Docker backend's engine and image.", no_args_is_help=True)
airflow_app = typer.Typer(help="The Airflow stack: api-server, scheduler, dag-processor (LocalExecutor, or CeleryExecutor with workers).", no_args_is_help=True)


def setup(
    kafka_version: Annotated[list[str], typer.Option(help="Kafka versions to fetch (3.3.x to 3.9.x, 4.x)")] = [maven.DEFAULT_KAFKA_VERSION],  # noqa: B006
    client_version: Annotated[list[str] | None, typer.Option(help="confluent-kafka versions to set up (2.0.2 or later), each in its own virtualenv")] = None,
    java_client_version: Annotated[list[str] | None, typer.Option(help="kafka-clients versions (3.x, 4.x) to fetch and build the Java producer driver against")] = None,
) -> None:
    """Fetch Kafka broker jars from Maven Central, and set up producer client versions of both
    families (idempotent)."""

    from acklab.cluster import class_archive
    from acklab.workload import families

    chosen = {"client_version": client_version or [], "java_client_version": java_client_version or []}
    wanted = [(family, chosen[family.version_option]) for family in families.FAMILIES.values()]

    def fetch() -> None:
        for kafka in kafka_version:
            maven.kafka_artifacts(kafka)  # a bad version fails before any download
        for family, versions in wanted:
            for version in versions:
                family.check_version(version)
        for kafka in kafka_version:
            console.print(f"kafka {kafka}: {maven.fetch_kafka(kafka)}")
            console.print(f"kafka {kafka} class archive: {class_archive.dump(kafka) or 'none (nodes start without it)'}")
        for family, versions in wanted:
            for version in versions:
                ready = family.fetch(version)
                # a family with its own interpreter per version shows it; one run by acklab's was built
                console.print(f"{family.label(ready)}: {ready.python if ready.python != sys.executable else 'built'}")

    user_errors(fetch)


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
    celery_workers: Annotated[int, typer.Option(
        min=0, max=8, help="CeleryExecutor with this many workers (one task each) and a project-local Redis broker; implies --postgres",
    )] = 0,
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
        state = airflow_stack.start(home, port=port or free_ports(1)[0], use_postgres=postgres or celery_workers > 0, celery_workers=celery_workers)
    except ServiceError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    typer.echo(f"Airflow UI: {state.url}  (metadata DB: {state.database}; {state.executor}" + (f", {len(state.workers)} workers)" if state.workers else ")"))
    typer.echo(f"login: {state.user} / {state.password}")
    typer.echo(f"logs: {home / 'logs'}; stop: make airflow-stop (acklab airflow down)")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@airflow_app.command("pool")
def airflow_pool_set() -> None:
    """Create (or update) the DAGs' pools in $AIRFLOW_HOME's metadata DB (`airflow pools set`); the
    shares pool gets ACKLAB_SHARE_SLOTS slots (default 1: one per worker that can hold a cluster)."""
    from acklab.services import airflow_pool

    for command in airflow_pool.set_commands():
        subprocess.run([str(Path(sys.executable).parent / "airflow"), *command], check=True, stdout=subprocess.DEVNULL)


@airflow_app.command("down")
def airflow_down() -> None:
    """Stop exactly the processes `acklab airflow up` started from $AIRFLOW_HOME."""
    from acklab.services import airflow_stack

    state = airflow_stack.stop_stack(_airflow_home())
    if state is None:
        typer.echo("no stack was started from this Airflow home")
    else:
        typer.echo(f"stopped: {', '.join(f'{p.name} ({p.pid})' for p in state.all_processes)}")

"""A project-local PostgreSQL server (Debian's `postgresql` package) for Airflow's metadata DB.

`start(folder)` initialises a cluster in `folder/data` on first use (superuser `acklab` with a
random password kept in `folder/password`, password authentication only), starts `postgres` on
127.0.0.1 at a free port with its socket in the data folder, and creates the `airflow` database.
PostgreSQL refuses to run as root: as root, the server runs as the `postgres` system user, which
then owns `folder`."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from acklab.cluster.layout import free_ports
from acklab.services.processes import ServiceError, ServiceProcess, spawn, stop, wait_until

SUPERUSER = "acklab"
DATABASE = "airflow"
SERVER_GLOB = "/usr/lib/postgresql/*/bin/postgres"  # Debian's layout: one folder per major version
SYSTEM_USER = "postgres"


@dataclass(frozen=True)
class Postgres:
    """A running server: its process, port and the password of its superuser."""

    process: ServiceProcess
    port: int
    password: str

    def url(self, driver: str = "postgresql+psycopg2") -> str:
        return f"{driver}://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"


def server_bin() -> Path:
    """The newest installed server's bin folder."""
    found = sorted(glob.glob(SERVER_GLOB), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise ServiceError("no PostgreSQL server installed (apt-get install postgresql)")
    return Path(found[-1]).parent


def _run_as() -> str | None:
    return SYSTEM_USER if os.geteuid() == 0 else None


def _own(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user, user)


def start(folder: Path, port: int | None = None) -> Postgres:
    """Initialise (first time) and start the server in `folder`; return when `airflow` accepts logins."""
    user = _run_as()
    binaries = server_bin()
    data = folder / "data"
    password_file = folder / "password"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    _own(folder, user)
    if not (data / "PG_VERSION").exists():
        password_file.write_text(secrets.token_urlsafe(24))
        password_file.chmod(0o600)
        _own(password_file, user)
        init = subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={password_file}",
             "--auth=scram-sha-256", "--encoding=UTF8", "--no-instructions"],
            env=_env(), user=user, group=user, capture_output=True, text=True, timeout=300, check=False,
        )
        if init.returncode != 0:
            raise ServiceError(f"initdb failed: {(init.stdout + init.stderr)[-1500:]}")
    port = port or free_ports(1)[0]
    process = spawn(
        "postgres",
        [str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", f"unix_socket_directories={data}"],
        folder / "postgres.log", _env(), user=user, stop_signal=signal.SIGINT,  # SIGINT: fast shutdown
    )
    server = Postgres(process=process, port=port, password=password_file.read_text().strip())
    try:
        wait_until(lambda: _create_database(server), f"PostgreSQL on 127.0.0.1:{port}", [process], 60)
    except BaseException:
        stop([process])
        raise
    return server


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _create_database(server: Postgres) -> bool:
    """Create the `airflow` database unless it exists; False while the server does not accept logins."""
    try:
        connection = psycopg2.connect(
            host="127.0.0.1", port=server.port, user=SUPERUSER, password=server.password, dbname="postgres", connect_timeout=3
        )
    except psycopg2.OperationalError:
        return False
    connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        connection.close()
    return True

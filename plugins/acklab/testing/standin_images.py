"""Stand-ins for the base images of docker-compose.yaml, built here from Debian's packages, for
machines that cannot pull images; the compose file itself keeps the official ones.

- `python:3.11-slim-bookworm` -> Debian bookworm with its Python 3.11 and pip as `python`/`pip`
  (pip may install system-wide, as in the official image);
- `postgres:16-bookworm` -> Debian bookworm's PostgreSQL 15 behind an entrypoint with the official
  image's contract for what the compose file uses (POSTGRES_USER/PASSWORD/DB, PGDATA, `postgres`
  command, `pg_isready`: `templates/postgres-standin-entrypoint.sh`);
- `redis:7-bookworm` -> Debian bookworm's `redis-server` (the Celery variant's broker; the compose
  file gives its whole command line, so no entrypoint is needed).

Each root filesystem is made by `mmdebstrap` from the host's Debian mirror and imported as one
layer (`docker import`, cheap with the vfs storage driver). It trusts the host's CA bundle, so pip
reaches the package index the way the host does. Then `docker/stack/Dockerfile` is built FROM the
Python stand-in (host network, for apt and pip). Tags carry a hash of their recipe and inputs, so a
rebuild is skipped while nothing changed."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from acklab.base.paths import PROJECT_ROOT

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
SUITE = "bookworm"
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
STACK_DOCKERFILE = PROJECT_ROOT / "docker" / "stack" / "Dockerfile"
STACK_CONTEXT = ("requirements.lock",)  # what docker/stack/Dockerfile.dockerignore lets through
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Standin:
    """How to build the stand-in of one official image."""

    repository: str
    stands_for: str
    packages: tuple[str, ...]
    hooks: tuple[str, ...]  # mmdebstrap --customize-hook commands ("$1" is the root)
    changes: tuple[str, ...]  # Dockerfile instructions for `docker import --change`


PYTHON = Standin(
    repository="acklab/standin-python",
    stands_for="python:3.11-slim-bookworm",
    packages=("python3", "python3-pip", "ca-certificates"),
    hooks=(
        'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
        'ln -sf /usr/bin/python3 "$1/usr/local/bin/python" && ln -sf /usr/bin/pip3 "$1/usr/local/bin/pip"',
        f"copy-in {CA_BUNDLE} /etc/ssl/certs",
    ),
    changes=(
        f"ENV PATH={BASE_PATH} LANG=C.UTF-8",
        f"ENV SSL_CERT_FILE={CA_BUNDLE} PIP_CERT={CA_BUNDLE} REQUESTS_CA_BUNDLE={CA_BUNDLE}",
        'CMD ["python3"]',
    ),
)
POSTGRES = Standin(
    repository="acklab/standin-postgres",
    stands_for="postgres:16-bookworm",
    packages=("postgresql-15",),
    hooks=(
        f"upload {TEMPLATES / 'postgres-standin-entrypoint.sh'} /usr/local/bin/docker-entrypoint.sh",
        'chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"',
    ),
    changes=(
        f"ENV PATH=/usr/lib/postgresql/15/bin:{BASE_PATH} LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data",
        'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]',
        'CMD ["postgres"]',
    ),
)


REDIS = Standin(
    repository="acklab/standin-redis",
    stands_for="redis:7-bookworm",
    packages=("redis-server",),
    hooks=(),
    changes=(f"ENV PATH={BASE_PATH} LANG=C.UTF-8", 'CMD ["redis-server"]'),
)


class StandinError(RuntimeError):
    """A stand-in could not be built (the message quotes the tool's output)."""


def _tag(repository: str, *parts: bytes) -> str:
    digest = hashlib.sha256(b"\0".join(parts)).hexdigest()
    return f"{repository}:{digest[:12]}"


def standin_tag(standin: Standin) -> str:
    recipe = repr((standin, MIRRORS)).encode()
    files = [TEMPLATES / "postgres-standin-entrypoint.sh", Path(CA_BUNDLE), Path(__file__)]
    return _tag(standin.repository, recipe, *(f.read_bytes() for f in files))


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def build_standin(standin: Standin, client: docker.DockerClient | None = None) -> str:
    """Make the root filesystem with mmdebstrap and import it, unless the tag exists; return the tag."""
    client = client or docker.from_env()
    tag = standin_tag(standin)
    if _exists(client, tag):
        return tag
    if shutil.which("mmdebstrap") is None:
        raise StandinError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    with tempfile.TemporaryDirectory(prefix="acklab-standin-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        command = ["mmdebstrap", "--variant=minbase", "--mode=root", f"--include={','.join(standin.packages)}"]
        command += [f"--customize-hook={hook}" for hook in standin.hooks]
        result = subprocess.run([*command, SUITE, str(rootfs), *MIRRORS], capture_output=True, text=True, timeout=1800, check=False)
        if result.returncode != 0:
            raise StandinError(f"mmdebstrap for {standin.stands_for} failed: {result.stderr[-2000:]}")
        repository, version = tag.split(":")
        with rootfs.open("rb") as data:
            client.api.import_image_from_data(data, repository=repository, tag=version, changes=list(standin.changes))
    client.images.get(tag)  # raises if the import did not produce it
    return tag


def build_stack(base: str, client: docker.DockerClient | None = None) -> str:
    """docker/stack/Dockerfile FROM `base` (host network for apt and pip), unless built already."""
    client = client or docker.from_env()
    inputs = [STACK_DOCKERFILE.read_bytes(), base.encode(), *((PROJECT_ROOT / name).read_bytes() for name in STACK_CONTEXT)]
    tag = _tag("acklab/stack", *inputs)
    if _exists(client, tag):
        return tag
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(STACK_DOCKERFILE, arcname="Dockerfile")
        for name in STACK_CONTEXT:
            tar.add(PROJECT_ROOT / name, arcname=name)
    context.seek(0)
    try:
        client.images.build(
            fileobj=context, custom_context=True, tag=tag, buildargs={"BASE": base}, network_mode="host", rm=True, forcerm=True,
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(line.get("stream", line.get("error", ""))) for line in exc.build_log)
        raise StandinError(f"building {STACK_DOCKERFILE} FROM {base} failed: {log[-3000:]}") from None
    return tag

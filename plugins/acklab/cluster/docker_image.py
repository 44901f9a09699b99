"""The local Kafka image for the Docker backend, built from files on this host (no pull).

`acklab docker image --kafka-version 4.3.1` prints its tag `acklab/kafka:4.3.1-<hash>`; with
`--context DIR` it writes a context for `docker build DIR` instead.

The root filesystem is a Java 17+ runtime copied from the host (headless parts only, symlinks
resolved), the shared libraries it and /bin/sh load (from `ldd`), and the Kafka jars that `acklab
setup` fetched into .cache/kafka/<version>. It is imported as one layer with the instructions of
the Dockerfile template (`templates/kafka-image.Dockerfile`, through `docker import --change`):
with the vfs storage driver every layer and every intermediate build container is a full copy, so
this is several times faster than a `docker build`. The tag carries a hash of the inputs (paths,
sizes, mtimes, this module and the Dockerfile), so a rebuild is skipped while nothing changed.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from acklab.base.maven import DEFAULT_KAFKA_VERSION, kafka_libs

DOCKERFILE = Path(__file__).resolve().parents[1] / "templates" / "kafka-image.Dockerfile"
REPOSITORY = "acklab/kafka"
JAVA_IN_IMAGE = "opt/java"
KAFKA_LIBS_IN_IMAGE = "opt/kafka/libs"
# Parts of a JDK/JRE a broker never loads: tools, headers, docs, javac's symbol table, desktop libraries.
SKIP_TOP = {"jmods", "include", "docs", "man", "demo", "legal"}
SKIP_LIB = {
    "src.zip", "ct.sym", "libawt_xawt.so", "libatk-wrapper.so", "libjawt.so", "libsplashscreen.so", "libjsound.so",
    "libfontmanager.so", "liblcms.so", "libjavajpeg.so", "libmlib_image.so", "libj2pcsc.so", "libsaproc.so",
}
LDD_PATH = re.compile(r"(/\S+) \(0x[0-9a-f]+\)$")
ETC = {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
       "etc/group": "root:x:0:\nnogroup:x:65534:\n"}


def java_home() -> Path:
    """The runtime of `ACKLAB_JAVA` or of `java` on PATH."""
    java = shutil.which(os.environ.get("ACKLAB_JAVA", "java"))
    if java is None:
        raise FileNotFoundError("no java on PATH (run `make setup`)")
    return Path(java).resolve().parent.parent


def runtime_files(home: Path) -> dict[str, Path]:
    """Image path -> host file for the headless runtime (symlinks resolved, dangling ones dropped)."""
    files = {f"{JAVA_IN_IMAGE}/bin/java": home / "bin" / "java"}
    for top in sorted(p for p in home.iterdir() if p.is_dir() and p.name not in SKIP_TOP | {"bin"}):
        for path in sorted(top.rglob("*")):
            if path.name in SKIP_LIB or not path.resolve().is_file():
                continue
            files[f"{JAVA_IN_IMAGE}/{path.relative_to(home)}"] = path.resolve()
    if (home / "release").is_file():
        files[f"{JAVA_IN_IMAGE}/release"] = home / "release"
    return files


def shared_libraries(binaries: list[Path], home: Path) -> dict[str, Path]:
    """Image path -> host file for every library (and the loader) the binaries need outside the
    runtime folder `home`, at the paths ldd reports."""
    out = subprocess.run(["ldd", *map(str, binaries)], capture_output=True, text=True, check=False).stdout
    libraries = {}
    for line in out.splitlines():
        match = LDD_PATH.search(line.strip())
        if match and not match[1].startswith(f"{home}/"):
            libraries[match[1].lstrip("/")] = Path(match[1]).resolve()
    return libraries


def rootfs_files(kafka_version: str) -> dict[str, Path]:
    home = java_home()
    files = runtime_files(home)
    shell = Path("/bin/sh").resolve()
    native = [home / "bin" / "java", shell] + [p for name, p in files.items() if name.endswith(".so")]
    files.update(shared_libraries(native, home))
    files["bin/sh"] = shell
    for jar in sorted(kafka_libs(kafka_version).glob("*.jar")):
        files[f"{KAFKA_LIBS_IN_IMAGE}/{jar.name}"] = jar
    return files


def content_tag(kafka_version: str, files: dict[str, Path]) -> str:
    digest = hashlib.sha256(DOCKERFILE.read_bytes() + Path(__file__).read_bytes())
    for name, path in sorted(files.items()):
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{REPOSITORY}:{kafka_version}-{digest.hexdigest()[:12]}"


def write_rootfs(files: dict[str, Path], out: Path) -> None:
    """A tar of the files (root-owned, modes kept) plus /tmp and a minimal /etc/passwd."""
    def add_dir(name: str, mode: int = 0o755) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
        tar.addfile(info)

    with tarfile.open(out, "w") as tar:
        add_dir("tmp", 0o1777)
        for name, text in ETC.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, fileobj=io.BytesIO(data))
        for name, path in sorted(files.items()):
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            with path.open("rb") as handle:
                tar.addfile(info, handle)


def image_changes() -> list[str]:
    """The Dockerfile's instructions other than FROM/ADD, for `docker import --change`."""
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "FROM", "ADD"))]


def build(kafka_version: str = DEFAULT_KAFKA_VERSION, client: docker.DockerClient | None = None) -> str:
    """Import the image unless an image with the same content tag exists; return the tag."""
    client = client or docker.from_env()
    files = rootfs_files(kafka_version)
    tag = content_tag(kafka_version, files)
    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    with tempfile.TemporaryDirectory(prefix="acklab-kafka-image-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        write_rootfs(files, rootfs)
        repository, version_tag = tag.split(":")
        with rootfs.open("rb") as data:
            client.api.import_image_from_data(data, repository=repository, tag=version_tag, changes=image_changes())
    client.images.get(tag)  # raises if the import did not produce it
    return tag


def write_context(kafka_version: str, out: Path) -> None:
    """Dockerfile + rootfs.tar in `out`, for `docker build` where BuildKit makes it cheap."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(DOCKERFILE, out / "Dockerfile")
    write_rootfs(rootfs_files(kafka_version), out / "rootfs.tar")

"""The evidence store: where a run's shares publish what they did, so that nothing after them needs
the host, disk or cluster they ran on (`acklab.orchestration.shares`).

A store is one of (`ACKLAB_EVIDENCE_STORE`; default the folder `evidence-store/` of the run store):

- a `file://` URL or an absolute path: a folder every worker mounts (a shared filesystem);
- an `s3://<bucket>/<prefix>` URL: an S3-compatible object store, reached through s3fs; its endpoint,
  region and credentials are what the AWS SDKs read (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
  `AWS_SECRET_ACCESS_KEY`, a profile or an instance role), so they never appear in the URL.

Both go through fsspec, the drivers Airflow's `ObjectStoragePath` uses; no other protocol is
offered. An object store has no directories and its listings may be cached by its driver: the
store asks it afresh on every call (no listings cache), so an attempt another worker finished is
seen at once. Its layout, stated here only:

    <store>/<run_id>/plan.json                                  the run's plan, published by its plan task
    <store>/<run_id>/share-<k>/attempt-<n>/...                  the share's work folder (a run folder's layout:
                                                                scenarios/, audit/ archive parts, cluster/ logs)
    <store>/<run_id>/share-<k>/attempt-<n>/finished.json        written last, by an attempt that ended:
                                                                only such an attempt is ever gathered

An attempt is the Airflow try that ran it: a retried share writes a new attempt folder and never
touches an earlier one's. An attempt without `finished.json` was killed (its worker died) or failed;
its files stay for whoever looks, and are never audited.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from acklab.base.paths import runs_dir
from acklab.base.spec import SpecError
from acklab.store.runs import STORE_DIR

FINISHED = "finished.json"
PLAN = "plan.json"


OFFERED = ("file", "s3")
"""The fsspec protocols a store may use (module docstring)."""

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""An S3 bucket name as AWS allows it (3-63 lower-case letters, digits, dots and hyphens)."""

_STORAGE_OPTIONS: dict[str, dict[str, Any]] = {"file": {"auto_mkdir": True}, "s3": {"use_listings_cache": False}}
"""Each offered protocol's fsspec options: a folder's parents are made as a file is written into
it (an object store has none to make); an object store is listed afresh on every call."""


def store_url() -> str:
    """The store's URL: ACKLAB_EVIDENCE_STORE (an absolute path is a `file://` URL; an `s3://` URL
    names a bucket and an optional prefix), else `file://<runs>/evidence-store`. Raises SpecError
    for any other protocol, a relative path or a bucket name S3 would refuse."""
    given = os.environ.get("ACKLAB_EVIDENCE_STORE")
    if not given:
        return f"file://{runs_dir() / STORE_DIR}"
    protocol, sep, rest = given.partition("://")
    if not sep:
        protocol, rest = "file", given
    if protocol == "file" and rest.startswith("/"):
        return f"file://{rest}"
    if protocol == "s3" and _BUCKET.fullmatch(rest.split("/", 1)[0]):
        return f"s3://{rest.rstrip('/')}"
    raise SpecError(
        f"ACKLAB_EVIDENCE_STORE: {given!r} is not offered; allowed: an absolute path or a file:// URL of a folder every worker "
        "mounts, or s3://<bucket>/<prefix> of an S3-compatible store"
    )


@dataclass(frozen=True)
class EvidenceStore:
    """One store (its URL); every path it writes is under `<url>/<run_id>/`."""

    url: str

    @classmethod
    def default(cls) -> EvidenceStore:
        return cls(store_url())

    @cached_property
    def _located(self) -> tuple[fsspec.AbstractFileSystem, str]:
        """The URL's filesystem and the store's root path in it, resolved once."""
        protocol = self.url.partition("://")[0]
        if protocol not in OFFERED:
            raise SpecError(f"evidence store {self.url!r}: {protocol} is not offered; allowed: {', '.join(OFFERED)}")
        fs, root = url_to_fs(self.url, **_STORAGE_OPTIONS[protocol])
        return fs, root.rstrip("/")

    @property
    def _fs(self) -> fsspec.AbstractFileSystem:
        return self._located[0]

    @property
    def _root(self) -> str:
        return self._located[1]

    def run(self, run_id: str) -> str:
        return f"{self._root}/{run_id}"

    def attempt(self, run_id: str, share: int, attempt: int) -> str:
        return f"{self.run(run_id)}/share-{share}/attempt-{attempt}"

    def put_plan(self, run_id: str, plan: Path) -> None:
        """Publish the run's plan (the plan task's `plan.json`)."""
        self._fs.put_file(str(plan), f"{self.run(run_id)}/{PLAN}")

    def get_plan(self, run_id: str, into: Path) -> None:
        into.parent.mkdir(parents=True, exist_ok=True)
        self._fs.get_file(f"{self.run(run_id)}/{PLAN}", str(into))

    def publish(self, folder: Path, run_id: str, share: int, attempt: int) -> str:
        """Copy `folder` (a share's work folder) to its attempt's place, once. Returns that path."""
        target = self.attempt(run_id, share, attempt)
        if self._fs.exists(target):
            raise FileExistsError(f"{target}: an attempt is published once")
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        if files:
            self._fs.put([str(p) for p in files], [f"{target}/{p.relative_to(folder).as_posix()}" for p in files])
        return target

    def finish(self, run_id: str, share: int, attempt: int, finished: dict[str, Any]) -> None:
        """Mark a published attempt as ended, with what `finished` says: written last, once its files are all there."""
        with self._fs.open(f"{self.attempt(run_id, share, attempt)}/{FINISHED}", "w") as out:
            out.write(json.dumps(finished, indent=2) + "\n")

    def attempts(self, run_id: str, share: int) -> dict[int, dict[str, Any] | None]:
        """Each published attempt of the share: its `finished.json`, or None (it never ended)."""
        fs, base = self._fs, f"{self.run(run_id)}/share-{share}"
        if not fs.exists(base):
            return {}
        found: dict[int, dict[str, Any] | None] = {}
        for path in fs.ls(base, detail=False):
            name = str(path).rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith("attempt-") or not name.removeprefix("attempt-").isdigit():
                continue
            marker = f"{base}/{name}/{FINISHED}"
            found[int(name.removeprefix("attempt-"))] = json.loads(fs.cat_file(marker)) if fs.exists(marker) else None
        return dict(sorted(found.items()))

    def fetch(self, run_id: str, share: int, attempt: int, into: Path) -> list[str]:
        """Copy an attempt's files into `into` (a run folder), keeping their relative paths; return them."""
        fs, base = self._fs, self.attempt(run_id, share, attempt)
        relatives = [r for r in (str(path).removeprefix(base + "/") for path in sorted(fs.find(base))) if r != FINISHED]
        for relative in relatives:
            (into / relative).parent.mkdir(parents=True, exist_ok=True)
        if relatives:
            fs.get([f"{base}/{r}" for r in relatives], [str(into / r) for r in relatives])
        return relatives

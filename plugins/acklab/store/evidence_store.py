"""The evidence store: where a run's shares publish what they did, so that nothing after them needs
the host, disk or cluster they ran on (`acklab.orchestration.shares`).

A store is a `file://` URL or an absolute path (`ACKLAB_EVIDENCE_STORE`; default the folder
`evidence-store/` of the run store): a folder every worker mounts (a shared filesystem). It is
reached through fsspec, the drivers Airflow's `ObjectStoragePath` uses, but only `file` is offered:
an object store (`s3://`) would take nothing but its driver here, and is refused until it is tested
against a real S3-compatible server (none is packaged for this machine). Its layout, stated here only:

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


OFFERED = ("file",)
"""The fsspec protocols a store may use (module docstring)."""


def store_url() -> str:
    """The store's URL: ACKLAB_EVIDENCE_STORE (an absolute path is a `file://` URL), else
    `file://<runs>/evidence-store`. Raises SpecError for any other protocol or a relative path."""
    given = os.environ.get("ACKLAB_EVIDENCE_STORE")
    if not given:
        return f"file://{runs_dir() / STORE_DIR}"
    protocol, sep, rest = given.partition("://")
    if not sep:
        protocol, rest = "file", given
    if protocol not in OFFERED or not rest.startswith("/"):
        raise SpecError(
            f"ACKLAB_EVIDENCE_STORE: {given!r} is not offered; allowed: an absolute path or a file:// URL of a folder every worker mounts"
        )
    return f"file://{rest}"


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
        fs, root = url_to_fs(self.url)
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
        self._fs.makedirs(self.run(run_id), exist_ok=True)
        self._fs.put_file(str(plan), f"{self.run(run_id)}/{PLAN}")

    def get_plan(self, run_id: str, into: Path) -> None:
        into.parent.mkdir(parents=True, exist_ok=True)
        self._fs.get_file(f"{self.run(run_id)}/{PLAN}", str(into))

    def publish(self, folder: Path, run_id: str, share: int, attempt: int) -> str:
        """Copy `folder` (a share's work folder) to its attempt's place, once. Returns that path."""
        target = self.attempt(run_id, share, attempt)
        fs = self._fs
        if fs.exists(target):
            raise FileExistsError(f"{target}: an attempt is published once")
        fs.makedirs(target, exist_ok=True)
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            relative = path.relative_to(folder).as_posix()
            fs.makedirs(f"{target}/{relative}".rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(path), f"{target}/{relative}")
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
        copied = []
        for path in sorted(fs.find(base)):
            relative = str(path).removeprefix(base + "/")
            if relative == FINISHED:
                continue
            target = into / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(path, str(target))
            copied.append(relative)
        return copied

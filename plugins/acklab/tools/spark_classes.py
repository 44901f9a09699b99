"""`make setup`'s last step: dump the Spark driver's class archive (`acklab.checker.submit.class_archive`)
unless there is one, from the audit itself: spark-submit of `spark/delivery_matrix.py` on synthetic
evidence (`acklab.testing.synthetic`, checked against its planted counts), the driver JVM started
with `-XX:ArchiveClassesAtExit`. Without an archive (the JVM could not dump one) audits start
without it, only slower."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from acklab.checker.submit import AuditError, audit_job, class_archive, submit, with_driver_options
from acklab.store.runs import RunDir
from acklab.testing.synthetic import generate

TRAINING_MESSAGES = 200_000


def dump() -> Path | None:
    """The archive, dumped now if missing; None if the JVM did not write one."""
    archive = class_archive()
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory(prefix="acklab-spark-classes-") as work:
            evidence = generate(Path(work) / "run", TRAINING_MESSAGES)
            job = audit_job(RunDir.of_manifest(evidence.manifest), topic_records=evidence.topic_records)
            job = dataclasses.replace(job, conf=with_driver_options(job.conf, f"-XX:ArchiveClassesAtExit={partial}"))
            (row,) = json.loads(submit(job).read_text())
        if wrong := evidence.mismatches(row):
            raise AuditError(f"the training audit's matrix differs from what was planted (got, planted): {wrong}")
        if not partial.exists():
            return None
        partial.replace(archive)  # written before the driver exited, which submit waited for
        return archive
    finally:
        partial.unlink(missing_ok=True)


def main() -> None:
    try:
        archive = dump()
    except AuditError as exc:
        sys.exit(f"spark class archive: {exc}")
    print(f"spark driver class archive: {archive or 'none (audits start without it)'}")


if __name__ == "__main__":
    main()

"""The transactions a partition's leader holds open, as Kafka's own tool reports them
(`kafka-transactions.sh describe-producers`, i.e. the DescribeProducers API, run from the jars of
the cluster's Kafka version)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"


@dataclass(frozen=True)
class OpenTransaction:
    """A producer with a transaction open on a partition, from `start_offset` on."""

    producer_id: int
    producer_epoch: int
    start_offset: int

    def __str__(self) -> str:
        return f"producer id {self.producer_id} epoch {self.producer_epoch} open since offset {self.start_offset}"


def parse_producers(table: str) -> list[OpenTransaction]:
    """The rows of a `describe-producers` table whose CurrentTransactionStartOffset is set."""
    lines = [line.split() for line in table.splitlines() if line.strip()]
    header = next((i for i, cells in enumerate(lines) if "ProducerId" in cells), None)
    if header is None:
        raise ValueError(f"no producer table in the tool's output: {table.strip()[-300:]!r}")
    columns = lines[header]
    found = []
    for cells in lines[header + 1 :]:
        row = dict(zip(columns, cells, strict=False))
        start = row.get("CurrentTransactionStartOffset", "None")
        if start.lstrip("-").isdigit() and int(start) >= 0:
            found.append(OpenTransaction(int(row["ProducerId"]), int(row["ProducerEpoch"]), int(start)))
    return found


def open_transactions(libs: Path, bootstrap_servers: str, topic: str, partition: int, timeout_s: float = 60.0) -> list[OpenTransaction]:
    """The open transactions of `topic`-`partition`, asked of its leader with the Kafka tool in
    `libs`. RuntimeError (one line) if the tool fails."""
    command = [
        os.environ.get("ACKLAB_JAVA", "java"), "-Xmx256m", "-cp", f"{libs}/*", TRANSACTIONS_TOOL,
        "--bootstrap-server", bootstrap_servers, "describe-producers", "--topic", topic, "--partition", str(partition),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"describe-producers failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return parse_producers(done.stdout)

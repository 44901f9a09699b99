"""The client seam: producer clients behind one small protocol (`ClientFamily`).

A family is a client implementation (librdkafka through confluent-kafka is the first:
`acklab.workload.librdkafka`): its versions and how they are fetched or built, how a profile becomes
its configuration and how that configuration is validated, how a producer process is launched, and
its documented defaults. Every family's producer processes meet one evidence contract: the send log,
statistics and error names of `acklab.store.schemas` and the worker protocol of
`acklab.workload.worker` (a `WorkerJob` line on stdin, `ready`, then `go`). The rest of acklab asks
`acklab.workload.families` for a client's family and never looks behind it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from acklab.base.paths import PROJECT_ROOT
from acklab.workload.profiles import ProducerProfile
from acklab.workload.spec import LoadSpec

if TYPE_CHECKING:  # a client's own interpreter imports this module without the processors' dependencies (jinja2)
    from acklab.workload.processing import ProcessorConfig


@dataclass(frozen=True)
class Client:
    """A set-up producer client: `version` of its family's package, with the `librdkafka` it bundles
    (its native core; "" for the Java client), run by `python` (the producer processes' interpreter)."""

    version: str
    librdkafka: str
    python: str
    family: str = "librdkafka"

    @property
    def env(self) -> dict[str, str]:
        """The environment of its producer processes (acklab importable from any interpreter)."""
        path = os.pathsep.join(filter(None, [str(PROJECT_ROOT / "plugins"), os.environ.get("PYTHONPATH")]))
        return {**os.environ, "PYTHONPATH": path}


class ProducerProcess(Protocol):
    """A running producer process: the worker protocol on its stdin and stdout, and its end."""

    stdin: TextIO
    stdout: TextIO

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    """Starts producer processes of one client, each logging to `log`."""

    def spawn(self, log: Path) -> ProducerProcess: ...


class ClientFamily(Protocol):
    """One producer client implementation, as the rest of acklab sees it."""

    name: str
    locked: str
    """The version used when none is chosen."""
    version_pattern: str
    defaults: Mapping[str, Any]
    """Documented defaults of the settings the guarantee model reads (e.g. `retry.backoff.ms`)."""

    def check_version(self, version: str) -> str:
        """`version` if acklab can run it; SetupError naming what is allowed otherwise."""
        ...

    def client(self, version: str | None) -> Client:
        """The set-up client of `version` (None: `locked`); SetupError if it is not set up."""
        ...

    def fetch(self, version: str) -> Client:
        """Fetch or build the client of `version` (idempotent)."""
        ...

    def config(self, profile: ProducerProfile) -> dict[str, Any]:
        """The client's configuration of `profile` (without the cluster's address or a transactional id)."""
        ...

    def resolve(self, profile: ProducerProfile, client: Client) -> ProducerProfile:
        """`profile` as `client` runs it: its typed fields what the client documents for the
        configuration at that version (defaults, automatic adjustments); SpecError (one line) if the
        client cannot run it."""
        ...

    def validate(self, client: Client, profiles: Sequence[ProducerProfile], load: LoadSpec) -> None:
        """SpecError (one line) unless `client` itself accepts each profile's configuration and the
        load's largest message."""
        ...

    def validate_processor(self, client: Client, processor_config: ProcessorConfig) -> None:
        """SpecError (one line, naming the property) unless `client` itself accepts the pipeline
        processors' own consumer and producer properties (`processor_config`)."""
        ...

    def label(self, client: Client) -> str:
        """How reports name `client`, e.g. ``confluent-kafka 2.16.1 (librdkafka 2.16.0)``."""
        ...

    def launcher(self, client: Client) -> Launcher:
        """Where `client`'s producer processes come from."""
        ...

    def processor_problem(self, client: Client, group_protocol: str, kafka_version: str) -> str | None:
        """Why `client` cannot run a pipeline processor with `group_protocol` against Kafka
        `kafka_version` (one line), or None."""
        ...

    def processor_command(self, client: Client, job: Path) -> list[str]:
        """The command that runs one pipeline processor instance of `client` on the job file `job`
        (`acklab.workload.processing.ProcessorJob`), in `client.env`."""
        ...

    def transaction_version(self, client: Client, kafka_version: str) -> int:
        """The transaction protocol `client`'s transactions run against Kafka `kafka_version`:
        2 (KIP-890 part 2: every transaction bumps the producer epoch, so a late EndTxn or write of
        an earlier transaction is fenced) where client and broker both have it, else 1."""
        ...


class FamilyFacts(Protocol):
    """What the rest of acklab asks of a client family beyond running it: the facts on which the
    families differ, so that no caller branches on a family's name (`acklab.workload.families`)."""

    config_file: str
    """The file name of a producer configuration in the family's own format (e.g. ``producer.properties``)."""
    version_option: str
    """The `acklab setup` option that sets up its versions (e.g. ``java_client_version``)."""

    def write_config(self, path: Path, config: Mapping[str, object]) -> None:
        """Write `config` (`ClientFamily.config`) to `path` in the family's own format."""
        ...

    def read_config(self, client: Client, path: Path) -> dict[str, str]:
        """A user's producer configuration file as `client` reads it, without the settings of the
        user's own cluster; SpecError (one line) for a file that cannot be read or holds nothing."""
        ...

    def unsplit_batch_bytes(self, config: Mapping[str, object]) -> int | None:
        """The largest record batch the client builds with `config` that it cannot split when a
        broker refuses it as too large; None if it splits a refused batch."""
        ...

    def error_names(self, librdkafka_names: Iterable[str]) -> set[str]:
        """The error names its send log records for the errors `librdkafka_names` (the evidence
        contract's names, `acklab.store.schemas`)."""
        ...


class Family(ClientFamily, FamilyFacts, Protocol):
    """A client family as `acklab.workload.families` holds it: how it runs and what it is."""

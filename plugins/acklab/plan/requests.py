"""Which `acklab run` options combine, and the run params they make.

A `RunRequest` is what a user typed: each option's value (unvalidated) and which options were given
rather than left at their defaults. `RunRequest.grid()` applies the rules of combination and returns
a `RunGrid` (the params and the Kafka versions and clients a version grid runs them on), or raises
a one-line SpecError:

- `--params FILE` fixes the run: only the output options combine with it;
- `--preset NAME` fixes the experiment: only `VERSIONED` (Kafka version, clients, backend) and the
  output options combine with it;
- `--standard` is the daily DAG's matrix: its profiles, faults, load and, unless clients are named,
  both families each in its own group;
- `--client-version V` is the client `librdkafka:V`;
- `--profiles-file` and `--librdkafka` add custom profiles, run by default (all of them) unless
  `--profile` names some;
- `--processing STYLE` runs pipeline scenarios (a style per option); without `--profile` no
  producer scenario beside them;
- `--producer-config FILE` is profile `custom`, read by the family whose configuration file is a
  `producer.properties` (the first client of that family named, else its default).

Options are named by their parameter names (`client_version`), shown as `--client-version`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from acklab.base import maven
from acklab.base.spec import SpecError, load_yaml
from acklab.plan.params import RunParams, standard_matrix
from acklab.plan.planner import librdkafka_clients
from acklab.plan.preset_files import given_presets_file
from acklab.plan.presets import VERSIONED, with_preset
from acklab.workload import families
from acklab.workload.profiles import RAW, load_profiles_file

DEFAULTS = RunParams()
OUTPUT_OPTIONS = ("as_json", "junit", "verbose")  # how a run is shown: they combine with everything
PROPERTIES_FILE = "producer.properties"  # the configuration file --producer-config is one of
PRESET_COMPANIONS = "only --kafka-version, --client, --client-version, --backend, --json and --junit"


class RunGrid(BaseModel):
    """Run params and the axes of their version grid (`acklab.plan.planner.version_grid`): every
    Kafka version x every client, None meaning the params' own."""

    model_config = ConfigDict(frozen=True)

    params: dict[str, Any]
    kafka_versions: list[str | None]
    clients: list[str | None]


class RunRequest(BaseModel):
    """The options of `acklab run` as given; `given` names (in the command's order) the options set
    rather than left at their defaults, including output options."""

    model_config = ConfigDict(frozen=True)

    given: tuple[str, ...] = ()
    preset: str | None = None
    presets_file: str | None = None  # the file naming `preset` (a path or a NAME: `acklab.plan.preset_files`)
    params_file: Path | None = None
    topology: str = DEFAULTS.topology
    profile: list[str] | None = None
    fault: list[str] | None = None
    schedule: Path | None = None
    messages: int = DEFAULTS.messages
    rate: float = DEFAULTS.rate or 0
    duration_s: float | None = None
    message_bytes: int = DEFAULTS.message_bytes
    keys: int = DEFAULTS.keys
    producers: int = DEFAULTS.producers
    topics: int = DEFAULTS.topics
    partitioner: str | None = None
    kafka_version: list[str] | None = None
    client: list[str] | None = None
    client_version: list[str] | None = None
    producer_config: Path | None = None
    profiles_file: Path | None = None
    librdkafka: list[str] | None = None
    backend: str = DEFAULTS.backend
    fault_at_s: float = DEFAULTS.fault_at_s
    fault_duration_s: float = DEFAULTS.fault_duration_s
    standard: bool = False
    one_at_a_time: bool = False
    processing: list[str] | None = None
    processors: int = DEFAULTS.processors
    input_profile: str = DEFAULTS.input_profile
    group_protocol: str = DEFAULTS.group_protocol
    consumer_property: list[str] | None = None
    processor_producer_property: list[str] | None = None

    def grid(self) -> RunGrid:
        """The params and grid these options ask for; SpecError (one line) for options that do not
        combine or a file that cannot be read. Files are read here; the params themselves are
        validated when planned."""
        if self.params_file is not None:
            return self._params_file_grid()
        base = standard_matrix() if self.standard else DEFAULTS
        params = self._own_params(base)
        if self.presets_file is not None and self.preset is None:
            raise SpecError("--presets-file names the file of --preset: give --preset NAME too (`acklab presets --presets-file FILE` lists them)")
        if self.preset is not None:
            refuse_beside(
                self.given, ("preset", "presets_file", *OUTPUT_OPTIONS, *VERSIONED), f"--preset {self.preset} fixes the experiment", PRESET_COMPANIONS
            )
            own_file = None if self.presets_file is None else given_presets_file(self.presets_file)
            params = with_preset(self.preset, {"backend": self.backend}, own_file)
        if self.schedule is not None:
            params["schedule"] = load_yaml(self.schedule, "schedule")
        clients = [*(self.client or []), *librdkafka_clients(self.client_version)]
        if self.standard and not clients and self.preset is None:  # both families, a group per fault and client, as the daily DAG
            params.update(clients=base.clients, clients_together=base.clients_together)
        custom = custom_profiles(self.profiles_file, self.librdkafka)
        if self.producer_config is not None:
            family = families.with_config_file(PROPERTIES_FILE)
            custom["custom"] = {family.name: properties_profile(self.producer_config, clients)}
            clients = clients or [family.name]
        if custom:
            params["custom_profiles"] = custom
            params["profiles"] = self.profile or list(custom)
        return RunGrid(params=params, kafka_versions=self.kafka_version or [None], clients=clients or [None])

    def _params_file_grid(self) -> RunGrid:
        assert self.params_file is not None
        refuse_beside(self.given, ("params_file", *OUTPUT_OPTIONS), "--params fixes the run", "only --json and --junit")
        loaded = load_yaml(self.params_file, "params")
        if not isinstance(loaded, dict):
            raise SpecError(f"{self.params_file}: expected a mapping of run params")
        return RunGrid(params=loaded, kafka_versions=[loaded.pop("kafka_version", None)], clients=[loaded.pop("client", None)])

    def _own_params(self, base: RunParams) -> dict[str, Any]:
        """The params of the options alone: `base`'s (the standard matrix's with --standard) profiles
        and faults unless given, and its load unless --messages / --rate differ from the defaults."""
        return {
            "topology": self.topology,
            "client_version": self.client_version,
            # With --processing the run is its pipelines unless --profile adds producer scenarios, and
            # the other way round.
            "profiles": self.profile or ([] if self.processing else base.profiles),
            "processing": self.processing or ([] if self.profile else base.processing),
            "processing_faults": None if self.fault else base.processing_faults,
            "pipelines_together": base.pipelines_together,
            "processors": self.processors,
            "input_profile": self.input_profile,
            "group_protocol": self.group_protocol,
            "processor_config": {
                "consumer": property_pairs(self.consumer_property, "--consumer-property"),
                "producer": property_pairs(self.processor_producer_property, "--processor-producer-property"),
            },
            "faults": self.fault or base.faults,
            "schedule": None,
            "messages": base.messages if self.standard and self.messages == DEFAULTS.messages else self.messages,
            "rate": (base.rate if self.standard and self.rate == DEFAULTS.rate else self.rate) or None,
            "duration_s": self.duration_s,
            "message_bytes": self.message_bytes,
            "keys": self.keys,
            "producers": self.producers,
            "topics": self.topics,
            "partitioner": self.partitioner,
            "backend": self.backend,
            "fault_at_s": self.fault_at_s,
            "fault_duration_s": self.fault_duration_s,
            "side_by_side": not self.one_at_a_time,
        }



def option_flag(name: str) -> str:
    """How the command line spells the option of parameter `name`."""
    return f"--{name.replace('_', '-')}"


def refuse_beside(given: tuple[str, ...], allowed: tuple[str, ...], what: str, companions: str) -> None:
    """SpecError naming the first given option not in `allowed`: "`what`: --x cannot be combined with
    it (`companions`)"."""
    if extra := [name for name in given if name not in allowed]:
        raise SpecError(f"{what}: {option_flag(extra[0])} cannot be combined with it ({companions})")


def custom_profiles(profiles_file: Path | None, librdkafka: list[str] | None) -> dict[str, Any]:
    """The user's profiles: a profiles file's, and `custom` from raw librdkafka PROPERTY=VALUE pairs."""
    custom = load_profiles_file(profiles_file) if profiles_file is not None else {}
    if librdkafka:
        custom["custom"] = {RAW: property_pairs(librdkafka, "--librdkafka")}
    return custom


def property_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """PROPERTY=VALUE items of a repeatable option as a mapping; SpecError (one line) for an item without both."""
    pairs = [item.partition("=") for item in items or []]
    if bad := [key for key, sign, _ in pairs if not sign or not key.strip()]:
        raise SpecError(f"{option} {bad[0]!r}: expected PROPERTY=VALUE, e.g. acks=all")
    return {key.strip(): value.strip() for key, _, value in pairs}


def properties_profile(path: Path, clients: list[str]) -> dict[str, str]:
    """The user's producer.properties as the family reading such files reads it: with the first of
    `clients` of that family, else its default version."""
    family = families.with_config_file(PROPERTIES_FILE)
    spec = next((spec for spec in clients if spec.partition(":")[0] == family.name), family.name)
    try:
        target = family.client(families.parse(spec)[1])
    except maven.SetupError as exc:
        raise SpecError(f"--producer-config: {exc}") from None
    return family.read_config(target, path)

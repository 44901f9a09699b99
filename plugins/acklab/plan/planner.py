"""Run planning: the validated plan (topology, client, load, scenarios with the model's
expectations) made once from what a user chooses (`acklab.plan.params.RunParams`), and kept in the
run folder (`plan.json`). No librdkafka, numpy or pyarrow at import. Running a plan is
`acklab.orchestration.execution`'s."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from acklab.base.maven import SetupError, kafka_libs
from acklab.base.spec import SpecError, parse_model
from acklab.cluster.links import unavailable as links_unavailable
from acklab.cluster.topology import Topology, load_topology
from acklab.model.beliefs import applying
from acklab.model.guarantees import Expected, expect
from acklab.model.setting import Setting
from acklab.nemesis.faults import FAULTS, PLANTING
from acklab.nemesis.schedule import FaultStep, check_schedule, schedule_for
from acklab.plan.feasibility import check_batches, check_feasible
from acklab.plan.params import RunParams
from acklab.plan.presets import preset
from acklab.workload import families
from acklab.workload.client import Client
from acklab.workload.partitioners import partition_for
from acklab.workload.processing import GroupProtocol, ProcessorConfig, Style, scenario_line
from acklab.workload.profiles import ProducerProfile, get_profile, profile_from_spec
from acklab.workload.spec import LoadSpec, key


class PipelineSpec(BaseModel):
    """A pipeline scenario's processing: its style, its processor instances and their group protocol
    (`acklab.workload.processing`); its load writes the input topic with the scenario's profile."""

    style: Style
    processors: int = 2
    group_protocol: GroupProtocol = "classic"
    config: ProcessorConfig = ProcessorConfig()  # the user's processor properties


class ScenarioPlan(BaseModel):
    name: str  # `<profile>__<fault>`; `<profile>.<client tag>__<fault>` for the run's other clients (`client_tag`)
    profile: ProducerProfile  # as its client runs it (`ClientFamily.resolve`)
    client: Client
    fault: str
    schedule: list[FaultStep]
    expected: Expected
    beliefs: tuple[str, ...] = ()  # the beliefs it tests (acklab.model.beliefs)
    control: bool = False  # the run's negative control (`CONTROL`): its own group, first, with its own load
    load: LoadSpec | None = None  # its own load (the control's), else the plan's
    pipeline: PipelineSpec | None = None  # a pipeline scenario: `profile` writes its input topic


CONTROL = "negative-control"
"""The negative controls, one per planting fault (`acklab.nemesis.faults.PLANTING`), each 1,000
messages at 1,000/s of the run's first client with the fault's `control_profile` and the run's keys
(or the fault's `control_keys`), whose writes to the leader of partition 0 (with `control_keys`: of
the partition of the control's first key) the proxy tampers with from 0.25 s on: an idempotent
producer's writes swallowed (`planted-loss`: the checker must count exactly the swallowed records
lost), a producer without idempotence's writes sent to the broker twice (`planted-duplicate`:
exactly the records appended again counted as duplicates), the answers' offsets shifted
(`planted-offset`: exactly the records acked elsewhere counted as offset mismatches), a producer
without idempotence's writes appended to another partition than the one it names
(`planted-misroute`: exactly the records moved counted as misrouted; no such control on a topology
of one partition, where no record can go elsewhere), and a producer without idempotence's request
held until the next one of its connection passed it (`planted-reorder`: exactly the records stored
after a later record of their key counted as reordered). The reorder control sends one key, all to
one partition: the next request always writes the held one's partition and key, so every record
of a swapped request is planted (with the run's 16 keys, requests of 5-10 records often shared no key with the
next, and a control planted nothing). Unless each is counted exactly, the run is invalid. Every
request to that broker in the window is tampered with (`CONTROL_SHARE`, not the faults' default
0.2): the Java producer batches a second's load into a few requests per broker (2 in the window,
measured on Kafka 3.5.2), so tampering with half of them left a control with nothing planted, and
the run invalid, one time in four. The records of the other brokers' partitions, and those sent
before 0.25 s, stay untouched."""
CONTROL_AT_S = 0.25
CONTROL_LOAD = {"messages": 1000, "rate": 1000.0}
CONTROL_SHARE = 1.0


PIPELINE_CONTROL = "pipeline-control"
"""The pipelines' negative control: the planted processor bug `eos-naive` (offsets committed by the
consumer after the transaction) under processor-kill at 1 s, 3,000 messages at 1,000/s. Its killed
batch is processed again: the checker must count exactly as many duplicated outputs as the
processors' logs say they re-processed, or the run is invalid."""
PIPELINE_CONTROL_AT_S, PIPELINE_CONTROL_LOAD = 1.0, {"messages": 3000, "rate": 1000.0}


class RunPlan(BaseModel):
    """A validated run: topology, producer clients, load and scenarios (client x profile x fault schedule)."""

    params: RunParams
    topology: Topology
    client: Client  # the first (or only) client; its scenarios keep the plain `<profile>__<fault>` names
    load: LoadSpec
    scenarios: list[ScenarioPlan]

    @property
    def checked(self) -> list[ScenarioPlan]:
        """Its scenarios but the negative control: the matrix proper."""
        return [scenario for scenario in self.scenarios if not scenario.control]

    @property
    def cuts_links(self) -> bool:
        """Some fault of the plan cuts links between nodes: the cluster needs link control."""
        return any(FAULTS[step.fault].cuts_links for scenario in self.scenarios for step in scenario.schedule)

    def groups(self) -> list[list[ScenarioPlan]]:
        """Scenarios run together: each negative control alone first, then all profiles of a fault
        (side_by_side), of every client or of each client apart (`clients_together`), with its
        pipelines or, apart (`pipelines_together`), followed by a group of them, in fault order;
        else one each."""
        control = [[scenario] for scenario in self.scenarios if scenario.control]
        scenarios = self.checked
        if not self.params.side_by_side:
            return control + [[scenario] for scenario in scenarios]
        faults = list(dict.fromkeys(s.fault for s in scenarios))
        clients = list(dict.fromkeys(s.client for s in scenarios))
        groups: dict[tuple[int, int, bool], list[ScenarioPlan]] = {}
        for scenario in scenarios:
            key = (
                faults.index(scenario.fault), 0 if self.params.clients_together else clients.index(scenario.client),
                scenario.pipeline is not None and not self.params.pipelines_together,
            )
            groups.setdefault(key, []).append(scenario)
        return control + [groups[key] for key in sorted(groups)]

    def load_of(self, group: list[ScenarioPlan]) -> LoadSpec:
        """The load each scenario of `group` sends."""
        return group[0].load or self.load

    def group_label(self, group: list[ScenarioPlan]) -> str:
        """How a group is named: its fault, and its client where a fault has a group per client."""
        if group[0].control:
            return f"{group[0].fault} (negative control)"
        label = group[0].fault
        if len({s.client for s in self.scenarios}) > len({s.client for s in group}):
            label += f" ({client_tag(group[0].client, list(dict.fromkeys(s.client for s in self.scenarios)))})"
        if not self.params.pipelines_together and group[0].pipeline is not None:
            label += " pipelines"
        return label


def make_plan(params: RunParams | dict[str, object]) -> RunPlan:
    """Resolve names and check every constraint; raise SpecError naming the bad field."""
    if not isinstance(params, RunParams):
        params = parse_model(RunParams, params, "params")
    if params.preset is not None:
        preset(params.preset, params.presets_file)  # SpecError naming the presets
    topology = load_topology(params.topology)
    if params.kafka_version:
        topology = parse_model(Topology, {**topology.model_dump(), "kafka_version": params.kafka_version}, "params.kafka_version")
    if params.broker_config:
        topology = topology.model_copy(update={"broker_overrides": {**topology.broker_overrides, **params.broker_config}})
    if params.backend == "local":
        try:
            kafka_libs(topology.kafka_version)
        except SetupError as exc:
            raise SpecError(f"kafka_version {topology.kafka_version}: {exc}") from None
    schedules = _fault_schedules(params, topology)
    cutting = sorted({step.fault for steps in schedules.values() for step in steps if FAULTS[step.fault].cuts_links})
    if cutting and (problem := links_unavailable()):
        raise SpecError(f"params.faults: {', '.join(cutting)} cut links between nodes, unavailable on this host: {problem}")
    load = parse_model(LoadSpec, params.model_dump(include=set(LoadSpec.model_fields)), "params")
    if params.rate is None and params.duration_s is None and any(schedules.values()):
        raise SpecError(
            f"params.rate: at full speed {params.messages} messages may all be sent before a fault starts "
            f"({params.fault_at_s:g} s in); set rate or duration_s so that the load outlasts the fault window"
        )
    if params.rate is not None or params.duration_s is not None:
        load_s = min(params.messages / params.rate if params.rate else float("inf"), params.duration_s or float("inf"))
        for fault, steps in schedules.items():
            late = [step for step in steps if step.at_s >= load_s]
            if late:
                raise SpecError(
                    f"params.fault_at_s: {fault} at {late[0].at_s}s would start after the load ends "
                    f"(after {load_s:.1f}s: {params.messages} messages at {params.rate or 'max'}/s, duration_s={params.duration_s})"
                )
    for name, spec in (params.custom_profiles or {}).items():
        profile_from_spec(name, spec, "params.custom_profiles")
    profiles = []
    for name in params.profiles:
        profile = get_profile(name, params.custom_profiles)
        if params.partitioner is not None:
            profile = parse_model(ProducerProfile, {**profile.model_dump(), "partitioner": params.partitioner}, "params.partitioner")
        profiles.append(profile)
    pipelines = _pipelines(params, schedules, topology)
    if pipelines and params.topics > 1:
        raise SpecError(f"params.topics: a pipeline reads one input topic; topics {params.topics} is for producer scenarios (1 with processing)")
    if pipelines:
        input_profile = get_profile(params.input_profile, params.custom_profiles)
        if input_profile.transaction is not None:
            raise SpecError(f"params.input_profile: {input_profile.name} is transactional; a pipeline's input is written by a non-transactional profile")
    checked_profiles = [*profiles, *([input_profile] if pipelines else [])]
    settings = check_feasible(topology, checked_profiles, load, [step for steps in schedules.values() for step in steps])
    clients = _clients(params)
    resolved = {}
    inputs = {}
    for client in clients:  # every client accepts every profile before anything starts
        family = families.of(client)
        resolved[client] = [family.resolve(profile, client) for profile in profiles]
        if pipelines:
            inputs[client] = family.resolve(input_profile, client)
            if problem := family.processor_problem(client, params.group_protocol, topology.kafka_version):
                raise SpecError(f"params.group_protocol: {problem}")
            family.validate_processor(client, params.processor_config)
        for profile in [*resolved[client], *([inputs[client]] if pipelines else [])]:
            check_batches(settings, client.family, profile, family.config(profile))
        family.validate(client, resolved[client], load)
    before_load = sorted({step.fault for steps in schedules.values() for step in steps if step.before_load})
    transactional = [p.name for own in resolved.values() for p in own if p.transaction is not None]
    if before_load and transactional:
        raise SpecError(
            f"params.profiles: {transactional[0]} is transactional and its producers initialise transactions before the "
            f"load, which {before_load[0]} in effect before the load may prevent; give it faults that start during the load"
        )
    scenarios = []
    for n, client in enumerate(clients):
        tag = "" if n == 0 else "." + client_tag(client, clients)
        for profile in resolved[client]:
            for fault, steps in schedules.items():
                if any(step.needs_pipeline for step in steps) or (params.schedule is None and fault not in params.faults):
                    continue  # processor faults act on pipelines only
                scenarios.append(
                    ScenarioPlan(
                        name=f"{profile.name}{tag}__{fault}",
                        profile=profile,
                        client=client,
                        fault=fault,
                        schedule=steps,
                        expected=expect(profile, topology, steps, client),
                        beliefs=applying(Setting.of(profile, topology, steps, client)),
                    )
                )
        for pipeline in pipelines:
            for fault, steps in schedules.items():
                if params.schedule is None and fault not in (params.processing_faults or params.faults):
                    continue
                scenarios.append(
                    ScenarioPlan(
                        name=f"{scenario_line(pipeline.style)}{tag}__{fault}",
                        profile=inputs[client],
                        client=client,
                        fault=fault,
                        schedule=steps,
                        expected=expect(inputs[client], topology, steps, client, pipeline.style),
                        beliefs=applying(Setting.of(inputs[client], topology, steps, client, pipeline.style)),
                        pipeline=pipeline,
                    )
                )
    if params.negative_control:
        if pipelines:
            scenarios.insert(0, _pipeline_control(topology, clients[0], load, inputs[clients[0]], params))
        scenarios[:0] = _controls(topology, clients[0], load)
    client = clients[0]
    return RunPlan(params=params, topology=topology, client=client, load=load, scenarios=scenarios)


def _pipeline_control(topology: Topology, client: Client, load: LoadSpec, profile: ProducerProfile, params: RunParams) -> ScenarioPlan:
    """The pipelines' negative control (`PIPELINE_CONTROL`), on the run's first client."""
    own = parse_model(LoadSpec, {**PIPELINE_CONTROL_LOAD, "message_bytes": load.message_bytes, "keys": load.keys}, "params (pipeline control)")
    steps = [parse_model(FaultStep, {"fault": "processor-kill", "at_s": PIPELINE_CONTROL_AT_S, "duration_s": 2.0}, "pipeline control")]
    return ScenarioPlan(
        name=f"{PIPELINE_CONTROL}__processor-kill", profile=profile, client=client, fault="processor-kill", schedule=steps,
        expected=expect(profile, topology, steps, client, "eos-naive"), control=True, load=own,
        pipeline=PipelineSpec(style="eos-naive", processors=params.processors, group_protocol=params.group_protocol),
    )


def _pipelines(params: RunParams, schedules: dict[str, list[FaultStep]], topology: Topology) -> list[PipelineSpec]:
    """The run's processing styles as pipeline specs; SpecError for processor faults without a
    pipeline or aimed at an instance the pipelines do not have."""
    for steps in schedules.values():
        for step in steps:
            if not step.needs_pipeline:
                continue
            if not params.processing:
                raise SpecError(f"params.faults: {step.fault} acts on a pipeline's processors or coordinators: give processing (e.g. eos)")
            instance = int(step.options.get("instance", 0))
            if instance >= params.processors:
                raise SpecError(f"params.faults: {step.fault} instance {instance} does not exist: processors are 0..{params.processors - 1}")
    return [
        PipelineSpec(style=style, processors=params.processors, group_protocol=params.group_protocol, config=params.processor_config)
        for style in params.processing
    ]


def _controls(topology: Topology, client: Client, load: LoadSpec) -> list[ScenarioPlan]:
    """The run's negative controls (`CONTROL`), with the run's message size, and its keys unless the
    fault's `Plants.control_keys` names the control's own (its step then targets the leader of the
    partition of the control's first key)."""
    family = families.of(client)
    own = parse_model(LoadSpec, {**CONTROL_LOAD, "message_bytes": load.message_bytes, "keys": load.keys}, "params (negative control)")
    planted = {fault: plants for fault, plants in PLANTING.items() if topology.partitions >= plants.min_partitions}  # else nothing could be planted
    profiles = {name: family.resolve(get_profile(name), client) for name in dict.fromkeys(p.control_profile for p in planted.values())}
    # One check of every control profile (one JVM for Java), with the run's keys: a control's own keys are no longer.
    family.validate(client, list(profiles.values()), own)
    controls = []
    for fault, plants in planted.items():
        profile = profiles[plants.control_profile].model_copy(deep=True)
        shared = "probability" in FAULTS[fault].options.model_fields
        step: dict[str, Any] = {"fault": fault, "at_s": CONTROL_AT_S, **({"options": {"probability": CONTROL_SHARE}} if shared else {})}
        mine = own
        if plants.control_keys is not None:
            mine = parse_model(LoadSpec, {**own.model_dump(), "keys": plants.control_keys}, "params (negative control)")
            step["target"] = f"leader:{partition_for(key(0, 0).encode(), topology.partitions, profile.partitioner)}"
        steps = [parse_model(FaultStep, step, "negative control")]
        check_schedule(steps, topology, "negative control")
        controls.append(
            ScenarioPlan(
                name=f"{CONTROL}__{fault}", profile=profile, client=client, fault=fault, schedule=steps,
                expected=expect(profile, topology, steps, client), control=True, load=mine,
            )
        )
    return controls


def version_grid(
    params: dict[str, Any], kafka_versions: list[str | None], clients: list[str | None], minimum: int = 2
) -> list[RunPlan]:
    """One plan per distinct (Kafka version, client) pair of the same params (None: the params' own),
    all validated before anything starts; at least `minimum` pairs (a comparison needs two). A client
    is `FAMILY:VERSION` (`acklab.workload.families.parse`); specs naming the same client (`librdkafka`
    and `librdkafka:2.16.1`, its locked version) make one pair, planned once."""
    for name, values in (("kafka_versions", kafka_versions), ("clients", clients)):
        if not values or len(set(values)) != len(values):
            raise SpecError(f"params.{name}: one or more distinct values, got {values}")
    base = {k: v for k, v in params.items() if k in RunParams.model_fields}
    plans: dict[tuple[str, Client], RunPlan] = {}
    for kafka in kafka_versions:
        for client in clients:
            plan = make_plan({**base, "kafka_version": kafka, **({} if client is None else {"client": client, "client_version": None, "clients": []})})
            plans.setdefault((plan.topology.kafka_version, plan.client), plan)
    if len(plans) < minimum:
        raise SpecError(f"params: a version comparison needs {minimum} or more distinct (kafka_versions x clients) pairs")
    return list(plans.values())


def librdkafka_clients(client_versions: list[str] | None) -> list[str]:
    """confluent-kafka versions (the `client_version` shorthand) as client specs."""
    return [f"{families.DEFAULT}:{version}" for version in client_versions or []]


def client_tag(client: Client, clients: list[Client]) -> str:
    """How a scenario name tells `client` from the run's other clients: its family, with its version
    when another client of the run is of the same family (`java`, `java-3.9.1`)."""
    same_family = [c for c in clients if c.family == client.family]
    return client.family if len(same_family) == 1 else f"{client.family}-{client.version}"


def _clients(params: RunParams) -> list[Client]:
    """The run's clients: `clients` side by side, else `client` (or confluent-kafka's `client_version`)."""
    specs = params.clients or ([params.client] if params.client is not None else [None])
    field = "clients" if params.clients else "client" if params.client is not None else "client_version"
    found = []
    try:
        for spec in specs:
            if spec is None:
                found.append(families.default().client(params.client_version))
            else:
                family, version = families.parse(spec)
                found.append(family.client(version))
    except SetupError as exc:
        raise SpecError(f"params.{field}: {exc}") from None
    if len(set(found)) != len(found):
        raise SpecError(f"params.clients: each client once, got {', '.join(specs)}")
    return found


def _fault_schedules(params: RunParams, topology: Topology) -> dict[str, list[FaultStep]]:
    """Fault label -> schedule: one per catalog name in `faults` (and in `processing_faults`, which
    count only with processing styles), or the explicit `schedule`."""
    if params.schedule is not None:
        check_schedule(params.schedule, topology, "params.schedule")
        return {"+".join(step.label for step in params.schedule) or "none": params.schedule}
    faults = list(dict.fromkeys([*params.faults, *((params.processing_faults or []) if params.processing else [])]))
    schedules = {fault: schedule_for(fault, params.fault_at_s, params.fault_duration_s) for fault in faults}
    for fault, steps in schedules.items():
        check_schedule(steps, topology, f"params.faults ({fault})")
    return schedules

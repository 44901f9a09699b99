"""What `acklab explore` searches and how it chooses a trial: the search space (`ExploreSpace`: clients,
Kafka versions, profiles, faults) and every bound of a trial (`MENU`), in one place. A trial is the run
params of one run (`acklab.plan.params.RunParams`): a few catalog profiles, each perhaps re-tuned
(linger, requests in flight, batch size), side by side under one fault schedule of one or two catalog
faults, perhaps overlapping, with random targets, options, timings, rate and producer count.

The search is guided by what the trials did (`Search`): a trial whose faults reached its client (a
retry, a request error, a timeout, a disconnect, writes answered with an error or left unanswered)
is kept, and later trials are, as often as not, heavier variants of a kept one (`heavier`: the same
faults under a higher rate and batches of more records), since batches under retry are where the
clients' batching bugs live. It is pure and seeded: the same seed, space and observations give the same trials
in the same order, so an exploration is repeated by its seed and its trial log. A trial the planner
refuses (two faults on broker processes overlapping, a batch larger than the topic takes, ...) is
chosen again by the caller; running trials, confirming and shrinking what goes red is
`acklab.orchestration.explore`'s."""

from __future__ import annotations

import copy
import random
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from acklab.base.spec import SpecError
from acklab.nemesis.faults import COORDINATORS, FAULT_NAMES, FAULTS, NO_FAULT
from acklab.proxy.codes import ERRORS, PRODUCE_ERRORS
from acklab.workload import families


class Menu(BaseModel):
    """The values a trial's knobs are drawn from (each uniformly, a value listed twice twice as often)."""

    model_config = ConfigDict(frozen=True)
    profiles_per_trial: tuple[int, ...] = (1, 2, 3)
    tuned_share: float = 0.7  # the share of a trial's profiles re-tuned from their catalog values
    linger_ms: tuple[int, ...] = (0, 5, 100, 500, 1000)
    max_in_flight: tuple[int, ...] = (1, 2, 5)
    batch_size: tuple[int, ...] = (16_384, 1_000_000, 10_000_000)  # bytes; librdkafka and Java both name it batch.size
    steps: tuple[int, ...] = (1, 1, 2)  # fault steps of a schedule
    default_target_share: float = 0.6  # a step keeps its fault's default target this often, else draws one it may take
    rate: tuple[float, ...] = (1000.0, 5000.0, 20_000.0, 50_000.0)
    load_s: tuple[float, ...] = (8.0, 15.0, 25.0)
    fault_at_s: tuple[float, float] = (0.5, 0.6)  # from this many seconds to this share of the load's length
    fault_duration_s: tuple[float, float] = (1.0, 12.0)
    producers: tuple[int, ...] = (1, 1, 2)
    message_bytes: tuple[int, ...] = (100, 100, 1000)
    probability: tuple[float, ...] = (0.1, 0.5, 1.0)  # a proxy fault's share of requests (its default too)
    heavier_share: float = 0.5  # once a trial's faults reached its client, the share of trials that are heavier variants of one
    retimed_share: float = 0.5  # the share of heavier variants whose fault steps are also re-timed


MENU = Menu()

MAX_BUDGET_MINUTES = 7 * 24 * 60  # the longest exploration


def check_budget(minutes: float) -> float:
    """The budget in seconds; SpecError in one line unless 0 < minutes <= MAX_BUDGET_MINUTES."""
    if not 0 < minutes <= MAX_BUDGET_MINUTES:
        raise SpecError(f"budget_minutes {minutes:g}: give 0 < N <= {MAX_BUDGET_MINUTES}")
    return minutes * 60


def explorable_faults() -> list[str]:
    """The catalog faults a trial may draw: those acting on producers' traffic, brokers or links (not
    the baseline, not the planting faults of the negative controls, not the pipelines' faults)."""
    return [
        name for name in FAULT_NAMES
        if name != NO_FAULT and FAULTS[name].plants is None and not FAULTS[name].needs_pipeline
        and (FAULTS[name].default_target is None or FAULTS[name].targets - COORDINATORS)
    ]


class ExploreSpace(BaseModel):
    """What an exploration draws from: its clients (FAMILY:VERSION), Kafka versions (None: the
    topology's), catalog profiles and faults, on one topology."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    topology: str = Field("three-brokers", description="the cluster topology of every trial")
    clients: tuple[str, ...] = Field(default_factory=lambda: (families.DEFAULT,), min_length=1, description="clients, FAMILY[:VERSION]")
    kafka_versions: tuple[str | None, ...] = Field((None,), min_length=1, description="Kafka versions (None: the topology's)")
    profiles: tuple[str, ...] = Field(default_factory=tuple, description="catalog profiles (empty: every one)")
    faults: tuple[str, ...] = Field(default_factory=tuple, description="catalog faults (empty: every explorable one)")

    @field_validator("clients")
    @classmethod
    def _clients(cls, clients: tuple[str, ...]) -> tuple[str, ...]:
        for spec in clients:
            families.parse(spec)  # SpecError naming the families
        return clients

    @field_validator("faults")
    @classmethod
    def _explorable(cls, faults: tuple[str, ...]) -> tuple[str, ...]:
        allowed = explorable_faults()
        if unknown := [fault for fault in faults if fault not in allowed]:
            raise ValueError(f"fault {unknown[0]!r} cannot be explored; explorable: {', '.join(allowed)}")
        return faults

    def profile_pool(self) -> list[str]:
        from acklab.workload.profiles import profile_names

        return list(self.profiles) or profile_names()

    def fault_pool(self, links: bool) -> list[str]:
        """The faults to draw from; those cutting links only if `links` (the host can cut them)."""
        return [f for f in (self.faults or explorable_faults()) if links or not FAULTS[f].cuts_links]


def draw(space: ExploreSpace, rng: random.Random, partitions: int, brokers: list[int], links: bool, number: int) -> dict[str, Any]:
    """One trial's run params (trial `number` of the exploration names its tuned profiles)."""

    pool = space.profile_pool()
    chosen = rng.sample(pool, min(len(pool), rng.choice(MENU.profiles_per_trial)))
    profiles, custom = [], {}
    for name in chosen:
        if rng.random() >= MENU.tuned_share:
            profiles.append(name)
            continue
        spec = _catalog_spec(name)
        linger = rng.choice(MENU.linger_ms)
        if spec.get("max_in_flight", 5) > 1:
            spec["max_in_flight"] = rng.choice(MENU.max_in_flight)
        tuned, custom[tuned] = _retuned(name, spec, number, linger, rng.choice(MENU.batch_size))
        profiles.append(tuned)
    rate = rng.choice(MENU.rate)
    load_s = rng.choice(MENU.load_s)
    faults = space.fault_pool(links)
    schedule = [_step(rng.choice(faults), rng, load_s, partitions, brokers) for _ in range(rng.choice(MENU.steps))]
    client = rng.choice(space.clients)
    return {
        "topology": space.topology, "kafka_version": rng.choice(space.kafka_versions), "client": client,
        "profiles": profiles, "custom_profiles": custom or None, "schedule": schedule,
        "rate": rate, "messages": int(rate * load_s), "producers": rng.choice(MENU.producers),
        "message_bytes": rng.choice(MENU.message_bytes), "negative_control": False,
    }


def _step(fault: str, rng: random.Random, load_s: float, partitions: int, brokers: list[int]) -> dict[str, Any]:
    """One fault step: a target it may take, its options drawn (`_options`), a start within the load."""
    spec = FAULTS[fault]
    step: dict[str, Any] = {"fault": fault, **_timing(rng, load_s)}
    kinds = sorted(spec.targets - COORDINATORS - {"broker"})
    if spec.default_target is not None and rng.random() >= MENU.default_target_share and kinds:
        kind = rng.choice([*kinds, *(["broker"] if "broker" in spec.targets else [])])
        step["target"] = (
            f"{kind}:{rng.randrange(partitions)}" if kind in ("leader", "follower")
            else f"broker:{rng.choice(brokers)}" if kind == "broker" else kind
        )
    if options := _options(spec.options, spec.answers_error, rng):
        step["options"] = options
    return step


def _timing(rng: random.Random, load_s: float) -> dict[str, float]:
    """A fault step's start (0.5 s into a load of `load_s` seconds or later) and length, drawn."""
    return {
        "at_s": round(rng.uniform(MENU.fault_at_s[0], load_s * MENU.fault_at_s[1]), 1),
        "duration_s": round(rng.uniform(*MENU.fault_duration_s), 1),
    }


def _catalog_spec(name: str) -> dict[str, Any]:
    """Catalog profile `name` as a custom profile's spec (its typed fields that differ from the defaults)."""
    from acklab.workload.profiles import get_profile

    return get_profile(name).model_dump(exclude={"name", "java", "java_only"}, exclude_defaults=True)


def _retuned(base: str, spec: dict[str, Any], number: int, linger_ms: int, batch_size: int) -> tuple[str, dict[str, Any]]:
    """`spec` (of catalog profile `base`) with `linger_ms` and `batch.size`, named for trial `number`."""
    spec["linger_ms"] = linger_ms
    spec["overrides"] = {**spec.get("overrides", {}), "batch.size": batch_size}
    spec["description"] = f"{base} re-tuned by acklab explore: linger.ms {linger_ms}, batch.size {batch_size}"
    return f"{base}-x{number}", spec


def _options(model: type[BaseModel], answers_error: bool, rng: random.Random) -> dict[str, Any]:
    """A fault's options drawn where the menu or the option's own type gives the values: a choice
    (Literal) or a switch (bool) uniformly, `probability` from the menu, `error` among the retriable
    errors a broker answers a write with; every other option keeps its default."""
    drawn: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if typing.get_origin(annotation) is typing.Literal:
            drawn[name] = rng.choice(typing.get_args(annotation))
        elif annotation is bool:
            drawn[name] = rng.random() < 0.5
        elif name == "probability" and annotation is float:
            drawn[name] = rng.choice(MENU.probability)
        elif name == "error" and answers_error:
            drawn[name] = rng.choice([e for e in PRODUCE_ERRORS if ERRORS[e].retriable])
    return drawn


def heavier(params: dict[str, Any], rng: random.Random, number: int) -> dict[str, Any]:
    """`params` under a heavier load, as trial `number`: more records to a batch, as the rate and each
    profile's linger.ms and batch.size go one step up the menu (a catalog profile re-tuned from its own
    values, an unset batch.size counted as the menu's smallest, Java's default; a value at the menu's
    top stays) and the values take the menu's smallest size; the same length of load and the same
    faults, their steps re-timed within it `MENU.retimed_share` of the time."""
    from acklab.workload.profiles import get_profile

    load_s = params["messages"] / params["rate"]
    rate = _up(MENU.rate, params["rate"])
    given = params.get("custom_profiles") or {}
    profiles, custom = [], {}
    for name in params["profiles"]:
        base = name.rsplit("-x", 1)[0] if name in given else name
        spec = copy.deepcopy(given[name]) if name in given else _catalog_spec(base)
        linger = _up(MENU.linger_ms, spec.get("linger_ms", get_profile(base).linger_ms))
        batch = _up(MENU.batch_size, spec.get("overrides", {}).get("batch.size", MENU.batch_size[0]))
        tuned, custom[tuned] = _retuned(base, spec, number, linger, batch)
        profiles.append(tuned)
    schedule = copy.deepcopy(params.get("schedule") or [])
    if rng.random() < MENU.retimed_share:
        for step in schedule:
            step.update(_timing(rng, load_s))
    return {
        **copy.deepcopy(params), "profiles": profiles, "custom_profiles": custom, "schedule": schedule, "rate": rate, "messages": int(rate * load_s),
        "message_bytes": min(MENU.message_bytes),  # more records to a batch
    }


def _up(menu: tuple[Any, ...], value: Any) -> Any:
    """The smallest menu value above `value`, else `value` (at or above the menu's top)."""
    return min((v for v in menu if v > value), default=value)


class Search:
    """An exploration's trials, in order: a fresh draw (`draw`) or, once some trial's faults reached its
    client (`observe`), `MENU.heavier_share` of the time a heavier variant of one such trial (`heavier`).
    Pure and seeded: the same seed, space and observations give the same trials."""

    def __init__(self, space: ExploreSpace, seed: int, partitions: int, brokers: list[int], links: bool) -> None:
        self.space, self.partitions, self.brokers, self.links = space, partitions, brokers, links
        self._rng = random.Random(seed)
        self._number = 0  # trials chosen so far (those the planner refused included): names re-tuned profiles
        self._kept: list[tuple[int, dict[str, Any]]] = []

    def next(self) -> tuple[dict[str, Any], int | None]:
        """The next trial's params, and the number of the kept trial it is a heavier variant of (None: drawn)."""
        self._number += 1
        if self._kept and self._rng.random() < MENU.heavier_share:
            trial, params = self._rng.choice(self._kept)
            return heavier(params, self._rng, self._number), trial
        return draw(self.space, self._rng, self.partitions, self.brokers, self.links, self._number), None

    def observe(self, trial: int, params: dict[str, Any], reached: bool) -> None:
        """What trial `trial` (run with `params`) did: kept for heavier variants if its faults reached its client."""
        if reached:
            self._kept.append((trial, params))


def trials(space: ExploreSpace, seed: int, partitions: int, brokers: list[int], links: bool) -> Iterator[dict[str, Any]]:
    """The fresh draws for `seed`, in order, endless (a `Search` told of no fault reaching a client):
    the same seed and space, the same trials."""
    search = Search(space, seed, partitions, brokers, links)
    while True:
        yield search.next()[0]

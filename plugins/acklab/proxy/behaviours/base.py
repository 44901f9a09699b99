"""What every proxy behaviour is: a name (the `action` of a `acklab.proxy.rules.ProxyRule`), the
one options model a fault of it is configured with, the counters that prove it acted, and what it
does to the traffic (`Activation`: created when its rule is installed, asked about each request and
response the rule selects). Each behaviour module of this package declares its own;
`acklab.proxy.behaviours.BEHAVIOURS` registers them by name, the nemesis takes a proxy fault's
options model from there and the proxy (`acklab.proxy.server.BrokerProxy`) its activation."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from acklab.proxy.codes import ANSWERABLE, APIS, ERRORS, PRODUCE, api_key, api_name, error_table
from acklab.proxy.connection import Connection, Held
from acklab.proxy.protocol import PRODUCE_VERSIONS, ProduceRequest, ProtocolError, RequestHeader, decode_request


def error_code(name: str) -> int:
    """The code of the error named `name` (`acklab.proxy.codes.ERRORS`)."""
    return ERRORS[name].code


def check_error(name: str | None, apis: list[int] | tuple[int, ...] = (PRODUCE,)) -> str | None:
    """`name` if it is an error a fault may answer every request of `apis` with (`ANSWERABLE`)."""
    if name is None:
        return None
    for api in apis:
        if api not in ANSWERABLE:
            raise ValueError(f"the proxy cannot answer {api_name(api)} requests with an error; it can: {', '.join(api_name(a) for a in ANSWERABLE)}")
        if name not in ANSWERABLE[api]:
            raise ValueError(f"error {name!r} is not one a broker answers {api_name(api)} with; valid: {error_table(api)}")
    return name


class ClusterFacts(Protocol):
    """What the cluster tells a fault when it starts, asked only by options that need it."""

    def leaders(self) -> dict[int, int]:
        """Partition -> the broker leading it now, in the scenario's topic (partitions without a leader left out)."""
        ...


class Options(BaseModel):
    """A behaviour's options: unknown names are refused. A rule of a behaviour whose options choose
    neither request types nor a share acts on every PRODUCE request (its activation may pass some)."""

    # Built on first use, not at import: the DAG files import the catalog when they are parsed.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    def at_start(self, facts: ClusterFacts) -> Options:
        """These options as the rule is installed with, once the fault starts: the same by default; a
        behaviour whose options depend on the cluster fills them in from `facts`."""
        return self

    def acts_on(self, api_key: int) -> bool:
        """Whether the rule selects requests (and their responses) of `api_key`."""
        return api_key == PRODUCE

    def share(self) -> tuple[float, int | None]:
        """(probability, count): each selected frame is affected with `probability`, at most `count` in all."""
        return 1.0, None


class ProxyOptions(Options):
    """Options of a behaviour acting on a share of the frames: each request (or response) is
    affected with `probability`, at most `count` of them in the window."""

    probability: float = Field(1.0, ge=0, le=1, description="share of the matching requests (or responses) affected")
    count: int | None = Field(None, ge=1, description="at most this many requests affected (default: no limit)")

    def share(self) -> tuple[float, int | None]:
        return self.probability, self.count


class FrameOptions(ProxyOptions):
    """`ProxyOptions` of a behaviour that may act on any request type (`apis`)."""

    apis: list[int] = Field(
        default_factory=lambda: [PRODUCE], description=f"request types, by name ({', '.join(APIS)}) or API key (empty = all)"
    )

    @field_validator("apis", mode="before")
    @classmethod
    def _api_keys(cls, apis: Any) -> Any:
        return [api_key(api) for api in apis] if isinstance(apis, list) else apis

    def acts_on(self, api_key: int) -> bool:
        return not self.apis or api_key in self.apis


@dataclass(frozen=True)
class Behaviour:
    """A proxy behaviour: `name` (the rule's `action`), `options` (the model a fault of it is
    configured with; several faults may share a behaviour with options of their own, `variants`),
    `counters` (proxy counters, any of which counted in the window proves it took effect),
    `activation` (its state and decisions while a rule of it is installed) and `log` (the control
    operation returning its per-request evidence, `Activation.evidence`, if it keeps one)."""

    name: str
    options: type[Options]
    counters: tuple[str, ...]
    activation: type[Activation]
    log: str | None = None
    variants: tuple[type[Options], ...] = ()

    @property
    def option_models(self) -> tuple[type[Options], ...]:
        """Every options model of this behaviour."""
        return (self.options, *self.variants)

    def options_of(self, options: Options | Mapping[str, Any]) -> Options:
        """`options` as an instance of one of `option_models`: an instance of one is kept; a mapping
        (a rule's options as the control channel carries them) is validated by the first model
        naming each of its keys that takes it (ValueError if none does)."""
        if isinstance(options, Options):
            if not isinstance(options, self.option_models):
                raise ValueError(f"{self.name} is configured by {' or '.join(m.__name__ for m in self.option_models)}, not {type(options).__name__}")
            return options
        if not isinstance(options, Mapping):
            raise ValueError(f"{self.name}: options must be a mapping of option names to values")
        fitting = [model for model in self.option_models if set(options) <= set(model.model_fields)] or [self.options]
        first: ValidationError | None = None
        for model in fitting:
            try:
                return model.model_validate(options)
            except ValidationError as exc:
                first = first or exc
        raise ValueError(f"{self.name} options: {first}")


class Verdict(enum.Enum):
    """What becomes of a frame an activation was asked about."""

    FORWARD = "forward"  # it goes on, as it is
    TAKEN = "taken"  # the behaviour took it: dropped, held, or answered in the broker's name
    CLOSE = "close"  # the client connection is closed (the client sees a disconnect)


class Rule(Protocol):
    """The installed rule, as its activation reads it (`acklab.proxy.rules.ProxyRule`): its
    behaviour's name and options (an instance of one of `Behaviour.option_models`)."""

    action: str
    options: Any


class Host(Protocol):
    """What the proxy of one broker offers the activation of its rule."""

    stats: Counter[str]
    rule: Rule | None
    holding: set[Connection]
    connections: set[Connection]  # its client connections open now
    broker: int  # the node id of the broker it forwards to
    peers: Mapping[int, int]  # every broker of the cluster (this one too) -> its upstream port on 127.0.0.1

    def hold(self, conn: Connection, held: Held) -> None:
        """Hold `held` back on `conn` until it is due or released; later requests of `conn` queue behind it."""

    def release_all(self) -> None:
        """Forward every held request now."""


class Activation:
    """A behaviour's state while one rule of it is installed on one broker's proxy (and after, for
    its evidence). The proxy asks it about each request and response its rule selects (API,
    probability, count); it counts what it did in `stats` and each frame it acted on in `affected`
    (the rule's `count` bounds that)."""

    def __init__(self, rule: Rule, host: Host) -> None:
        self.rule, self.host, self.stats, self.affected = rule, host, host.stats, 0

    def on_connect(self, conn: Connection) -> None:
        """A client connection of the rule's broker: one open when the rule was installed, or one
        opened while it is."""

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        """What becomes of a request the rule selects (`size` + `body`: its frame)."""
        return Verdict.FORWARD

    async def on_response(self, conn: Connection, body: bytes, api_key: int, version: int) -> bytes | Verdict:
        """The response body the client gets (Verdict.TAKEN: none, Verdict.CLOSE: its connection is closed)."""
        return body

    def on_queued(self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, due: float) -> None:
        """A request of `conn` arrived behind one this activation held: hold it too (in order, due with it)."""
        raise NotImplementedError

    def on_answered(self, api_key: int) -> None:
        """Some broker of the proxy answered a request of `api_key`."""

    def on_end(self) -> None:
        """The rule was lifted (held requests are already released)."""

    def evidence(self) -> list[dict]:
        """The per-frame log of what it did (`Behaviour.log`)."""
        return []


def parse_produce(stats: Counter[str], body: bytes, version: int) -> tuple[RequestHeader, ProduceRequest] | None:
    """A PRODUCE request, or None (counted as `unparsed_produce`) if the codec cannot read it."""
    if version in PRODUCE_VERSIONS:
        try:
            return decode_request(body)
        except ProtocolError:
            pass
    stats["unparsed_produce"] += 1
    return None

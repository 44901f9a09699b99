"""What every proxy behaviour is: a name (the `action` of a `acklab.proxy.rules.ProxyRule`), the
one options model a fault of it is configured with, and the counters that prove it acted. Each
behaviour module of this package declares its own; `acklab.proxy.behaviours.BEHAVIOURS` registers
them by name, and the nemesis takes a proxy fault's options model from there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from acklab.proxy.codes import ANSWERABLE, APIS, PRODUCE, api_key, api_name, error_table


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


class Options(BaseModel):
    """A behaviour's options: unknown names are refused."""

    # Built on first use, not at import: the DAG files import the catalog when they are parsed.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ProxyOptions(Options):
    """Options of a behaviour acting on a share of the frames: each request (or response) is
    affected with `probability`, at most `count` of them in the window."""

    probability: float = Field(1.0, ge=0, le=1, description="share of the matching requests (or responses) affected")
    count: int | None = Field(None, ge=1, description="at most this many requests affected (default: no limit)")


class FrameOptions(ProxyOptions):
    """`ProxyOptions` of a behaviour that may act on any request type (`apis`)."""

    apis: list[int] = Field(
        default_factory=lambda: [PRODUCE], description=f"request types, by name ({', '.join(APIS)}) or API key (empty = all)"
    )

    @field_validator("apis", mode="before")
    @classmethod
    def _api_keys(cls, apis: Any) -> Any:
        return [api_key(api) for api in apis] if isinstance(apis, list) else apis


@dataclass(frozen=True)
class Behaviour:
    """A proxy behaviour: `name` (the rule's `action`), `options` (the model a fault of it is
    configured with; several faults may share a behaviour with options of their own, `variants`),
    `counters` (proxy counters, any of which counted in the window proves it took effect) and
    `log` (the control operation returning its per-request evidence, if it keeps one)."""

    name: str
    options: type[Options]
    counters: tuple[str, ...]
    log: str | None = None
    variants: tuple[type[Options], ...] = ()

    @property
    def option_models(self) -> tuple[type[Options], ...]:
        """Every options model of this behaviour."""
        return (self.options, *self.variants)

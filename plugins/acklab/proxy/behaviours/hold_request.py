"""hold_request: matching requests are withheld and forwarded later (after `delay_s`, after the
next answer to a `replay_after` request, or when the rule ends); each is logged (`withheld`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from acklab.proxy.behaviours.base import Behaviour, FrameOptions, ProxyOptions
from acklab.proxy.codes import APIS, PRODUCE, api_key


class HoldOptions(ProxyOptions):
    """Held PRODUCE requests are forwarded after `delay_s`, and at the latest when the window ends."""

    delay_s: float = Field(0.0, ge=0, description="release each request this long after it arrived (0: at the window's end)")


class WithholdOptions(FrameOptions):
    """Which requests are withheld and when they are replayed: `delay_s` after each was withheld,
    or `delay_s` after the next request of type `replay_after` any broker answered, and at the
    latest at the window's end. PRODUCE requests may be chosen by what they carry."""

    count: int | None = Field(1, ge=1, description="at most this many requests withheld (default 1)")
    nth: int = Field(1, ge=1, description="withhold from the nth matching request on (the ones before pass)")
    partition: int | None = Field(None, ge=0, description="only produce requests writing this partition")
    producer_id: int | None = Field(None, ge=0, description="only produce requests of this producer id")
    transactional_id: str | None = Field(None, description="only produce requests of this transactional id")
    transactional_only: bool = Field(False, description="only produce requests of transactional producers")
    delay_s: float = Field(
        0.0, ge=0, description="replay this long after each request was withheld, or after replay_after's answer (0: at once; no trigger: at the window's end)"
    )
    replay_after: int | None = Field(None, description=f"replay right after a request of this type ({', '.join(APIS)}) is answered")

    @field_validator("replay_after", mode="before")
    @classmethod
    def _trigger(cls, name: Any) -> Any:
        return None if name is None else api_key(name)

    @model_validator(mode="after")
    def _consistent(self) -> WithholdOptions:
        choosing = self.transactional_only or any(v is not None for v in (self.partition, self.producer_id, self.transactional_id))
        if choosing and self.apis != [PRODUCE]:
            raise ValueError("partition, producer_id, transactional_id and transactional_only choose among Produce requests: apis must be [Produce]")
        return self


BEHAVIOUR = Behaviour("hold_request", HoldOptions, ("held_requests",), log="withheld", variants=(WithholdOptions,))

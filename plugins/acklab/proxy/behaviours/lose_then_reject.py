"""lose_then_reject: the first PRODUCE request carrying an idempotent producer's batch is lost with
its connection; the lost batch's retry is answered with `error` while the requests behind it reach
the broker."""

from __future__ import annotations

from pydantic import Field, field_validator

from acklab.proxy.behaviours.base import Behaviour, Options, check_error


class LoseThenRejectOptions(Options):
    """How long the lost connection lives before the proxy closes it, and how long the rejection
    of the lost batch's retry is held (requests behind it are pipelined meanwhile)."""

    error: str = Field("NOT_ENOUGH_REPLICAS", description="the error the lost batch's retry is answered with")
    delay_s: float = Field(0.5, gt=0, description="seconds the lost connection lives; seconds the retry's rejection is held")

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


BEHAVIOUR = Behaviour("lose_then_reject", LoseThenRejectOptions, ("injected_errors",))

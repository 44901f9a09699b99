"""replace_error: a PRODUCE request reaches the broker; the partitions its response reports
appended carry `error` instead."""

from __future__ import annotations

from pydantic import Field, field_validator

from acklab.proxy.behaviours.base import Behaviour, ProxyOptions, check_error


class AfterAppendOptions(ProxyOptions):
    """The error a PRODUCE response's appended partitions are reported with, by name."""

    error: str = Field("NOT_ENOUGH_REPLICAS_AFTER_APPEND", description="the error's name (one a broker answers Produce with)")

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


BEHAVIOUR = Behaviour("replace_error", AfterAppendOptions, ("replaced_errors",))

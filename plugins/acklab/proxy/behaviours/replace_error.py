"""replace_error: a PRODUCE request reaches the broker; the partitions its response reports
appended carry `error` instead."""

from __future__ import annotations

from pydantic import Field, field_validator

from acklab.proxy.behaviours.base import Activation, Behaviour, ProxyOptions, Verdict, check_error, error_code
from acklab.proxy.codes import PRODUCE
from acklab.proxy.connection import Connection
from acklab.proxy.protocol import PRODUCE_VERSIONS, ProtocolError, with_error


class AfterAppendOptions(ProxyOptions):
    """The error a PRODUCE response's appended partitions are reported with, by name."""

    error: str = Field("NOT_ENOUGH_REPLICAS_AFTER_APPEND", description="the error's name (one a broker answers Produce with)")

    @field_validator("error")
    @classmethod
    def _known(cls, name: str) -> str:
        return check_error(name)  # type: ignore[return-value]


class ReplaceError(Activation):
    """A PRODUCE response's appended partitions carry the rule's error (unchanged if unparsed)."""

    async def on_response(self, conn: Connection, body: bytes, api_key: int, version: int) -> bytes | Verdict:
        if api_key != PRODUCE:
            return body
        try:
            if version not in PRODUCE_VERSIONS:
                raise ProtocolError(f"version {version}")
            body, changed = with_error(body, version, error_code(self.rule.options.error))
        except ProtocolError:
            self.stats["unparsed_produce"] += 1
            return body
        if changed:
            self.affected += 1
            self.stats["replaced_errors"] += 1
        return body


BEHAVIOUR = Behaviour("replace_error", AfterAppendOptions, ("replaced_errors",), ReplaceError)

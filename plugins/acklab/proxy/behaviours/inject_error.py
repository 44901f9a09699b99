"""inject_error: a request is answered by the proxy with `error` and never reaches the broker (a
Metadata request does, and every topic of its answer carries the error)."""

from __future__ import annotations

from pydantic import Field, model_validator

from acklab.proxy.behaviours.base import Behaviour, FrameOptions, check_error


class ErrorOptions(FrameOptions):
    """The error the chosen requests are answered with, by name: one a broker answers each of
    them with (`acklab.proxy.codes.ANSWERABLE`)."""

    error: str = Field("NOT_ENOUGH_REPLICAS", description="the error's name (one a broker answers each of the apis with)")

    @model_validator(mode="after")
    def _answerable(self) -> ErrorOptions:
        if not self.apis:
            raise ValueError("apis: name the request types to answer with an error")
        check_error(self.error, self.apis)
        return self


BEHAVIOUR = Behaviour("inject_error", ErrorOptions, ("injected_errors",))

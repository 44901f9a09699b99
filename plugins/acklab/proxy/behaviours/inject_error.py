"""inject_error: a request is answered by the proxy with `error` and never reaches the broker (a
Metadata request does, and every topic of its answer carries the error)."""

from __future__ import annotations

from pydantic import Field, model_validator

from acklab.proxy import answers
from acklab.proxy.behaviours.base import Activation, Behaviour, FrameOptions, Verdict, check_error, error_code, parse_produce
from acklab.proxy.codes import METADATA, PRODUCE, api_name
from acklab.proxy.connection import Connection, Tap
from acklab.proxy.protocol import ProtocolError, error_response


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


class Rewrite(Tap):
    """Metadata requests of a connection forwarded whose answer gets an error: correlation -> code."""

    def __init__(self, activation: Activation) -> None:
        self.stats = activation.stats
        self.codes: dict[int, int] = {}

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        if (code := self.codes.pop(correlation, None)) is None:
            return body
        try:
            body, topics = answers.metadata_with_error(body, version, code)
        except ProtocolError:
            self.stats[f"unanswerable.{api_name(METADATA)}"] += 1
            return body
        if topics:
            self.stats["injected_errors"] += 1
            self.stats["injected_topic_errors"] += topics
        return body


class InjectError(Activation):
    """Answers a request with the rule's error in the broker's place; closes the connection for an
    acks=0 PRODUCE (as a broker does: `closed_after_error`); forwards a request the proxy cannot
    answer (`unanswerable.<api>`). A Metadata request is forwarded and its answer rewritten (every
    topic carries the error: `injected_topic_errors`)."""

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        code = error_code(self.rule.options.error)
        if api_key == METADATA:
            rewrite = next((tap for tap in conn.response_taps if isinstance(tap, Rewrite)), None)
            if rewrite is None:
                rewrite = Rewrite(self)
                conn.response_taps.append(rewrite)
            rewrite.codes[correlation] = code
            self.affected += 1
            return Verdict.FORWARD
        if api_key == PRODUCE:
            if (parsed := parse_produce(self.stats, body, version)) is None:
                return Verdict.FORWARD
            header, request = parsed
            if request.acks == 0:
                self.affected += 1
                self.stats["injected_errors"] += 1
                self.stats["closed_after_error"] += 1
                return Verdict.CLOSE
            answer = error_response(header, request, code)
        else:
            try:
                answer = answers.error_answer(body, code)
            except ProtocolError:
                self.stats[f"unanswerable.{api_name(api_key)}"] += 1
                return Verdict.FORWARD
        self.affected += 1
        self.stats["injected_errors"] += 1
        conn.answer(correlation, version, answer)
        return Verdict.TAKEN


BEHAVIOUR = Behaviour("inject_error", ErrorOptions, ("injected_errors",), InjectError)

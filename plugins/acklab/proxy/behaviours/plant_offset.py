"""plant_offset: a PRODUCE request reaches the broker as sent; the answer the client gets reports
each appended partition at an offset `SHIFT` beyond the one the broker gave, and each shifted
partition is logged (`shifted`).

The request's record counts are read when it passes, and a tap on its connection rewrites its
answer whenever it comes (also after the rule is lifted): the records sit where the broker put
them, the client believes them elsewhere. A partition the broker answered with an error is passed
as answered (logged, not shifted). acks=0 requests pass untouched (no answer to rewrite:
`unanswered_passed`), as do requests the codec cannot count (`unparsed_produce`)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from acklab.proxy.behaviours.base import Behaviour, Verdict
from acklab.proxy.behaviours.planting import AnsweredPlanting, PlantingOptions, answered_produce, topic_key, topics_of
from acklab.proxy.codes import error_name
from acklab.proxy.connection import Connection
from acklab.proxy.protocol import ProtocolError, decode_response, encode_response

SHIFT = 1 << 40  # added to an answer's base offset: far beyond any offset a broker gives


class PlantOffsetOptions(PlantingOptions):
    probability: float = Field(0.2, ge=0, le=1, description="share of the produce requests whose answer is shifted, once each topic's has been")


class PlantOffset(AnsweredPlanting):
    """Lets a PRODUCE request pass and leaves a tap that shifts its answer's base offsets."""

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if (answerable := answered_produce(self, body, api_key, version)) is None or not self.share.chosen(topics_of(answerable[2])):
            return Verdict.FORWARD
        self.expect_answer(conn, correlation, answerable[2])
        self.affected += 1
        self.stats["shifted_requests"] += 1
        return Verdict.FORWARD

    def on_answer(self, entries: list[dict], body: bytes, version: int) -> bytes:
        """The answer `body` with each appended partition's base offset moved by `SHIFT`; each
        partition's entry gets the broker's error and the offset it really gave."""
        try:
            correlation, response = decode_response(body, version)
        except ProtocolError:  # passed as the broker wrote it: nothing shifted
            self.stats["unparsed_answers"] += 1
            for entry in entries:
                entry.update(answered=True, error="unparsed")
            return body
        wanted = {(entry["topic"], entry["partition"]): entry for entry in entries}
        topics = []
        for topic in response.topics:
            partitions = []
            for partition in topic.partitions:
                entry = wanted.pop((topic_key(topic), partition.index), None)
                if entry is not None:
                    entry.update(answered=True, error=error_name(partition.error_code), base_offset=partition.base_offset)
                    if partition.error_code == 0 and partition.base_offset >= 0:
                        partition = replace(partition, base_offset=partition.base_offset + SHIFT)
                        self.stats["shifted_records"] += entry["records"]
                    elif partition.error_code == 0:
                        entry["error"] = "no offset in the answer"
                partitions.append(partition)
            topics.append(replace(topic, partitions=tuple(partitions)))
        for entry in wanted.values():  # not in the answer: nothing shifted
            entry.update(answered=True, error="no answer for the partition")
        return encode_response(correlation, replace(response, topics=tuple(topics)), version)


BEHAVIOUR = Behaviour("plant_offset", PlantOffsetOptions, ("shifted_requests",), PlantOffset, log="shifted")

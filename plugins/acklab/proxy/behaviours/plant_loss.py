"""plant_loss: a PRODUCE request never reaches the broker; the proxy answers it as appended, in the
broker's name, and logs each swallowed partition (`swallowed`)."""

from __future__ import annotations

import time

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, Options, Rule, Verdict
from acklab.proxy.behaviours.planting import counted_produce, topic_key
from acklab.proxy.connection import Connection
from acklab.proxy.protocol import success_response

FABRICATED_OFFSET = 1 << 40  # the offsets the proxy makes up start here (far beyond any real one)


class PlantLossOptions(Options):
    """The planted loss takes no options: it swallows every PRODUCE request it can count."""


class PlantLoss(Activation):
    """Answers a PRODUCE request as appended, in the broker's name (offsets from `FABRICATED_OFFSET`
    on, per partition; acks=0: no answer), and logs each swallowed partition. A request whose
    record batches the codec cannot count passes (`unparsed_produce`)."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.swallowed: list[dict] = []
        self.fabricated: dict[tuple[str | bytes, int], int] = {}  # (topic, partition) -> next made-up offset

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if (counted := counted_produce(self, body, api_key, version)) is None:
            return Verdict.FORWARD
        header, request, partitions = counted
        offsets = {}
        for topic, partition, count in partitions:
            key = (topic.name or topic.topic_id, partition.index)
            offsets[key] = self.fabricated.get(key, FABRICATED_OFFSET)
            self.fabricated[key] = offsets[key] + count  # type: ignore[operator]
            producer_id, epoch, sequence = partition.producer_sequence() or (-1, -1, -1)
            self.swallowed.append(
                {
                    "topic": topic_key(topic), "partition": partition.index, "records": count,
                    "base_offset": offsets[key], "producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence,
                    "at": time.time(), "answered": request.acks != 0,
                }
            )
            self.stats["swallowed_records"] += count  # type: ignore[operator]
        self.affected += 1
        self.stats["swallowed_requests"] += 1
        if request.acks != 0:
            conn.answer(correlation, header.api_version, success_response(header, request, offsets))
        return Verdict.TAKEN

    def evidence(self) -> list[dict]:
        return self.swallowed


BEHAVIOUR = Behaviour("plant_loss", PlantLossOptions, ("swallowed_requests",), PlantLoss, log="swallowed")

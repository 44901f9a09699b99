"""librdkafka's own verdict on producer configurations, run inside a client's interpreter.

`check(items)`: for each `{config, key, value_bytes}`, whether librdkafka accepts the configuration
(its error message, naming the property, if not) and, if it refuses a `value_bytes` value under
`key` at `produce()` (e.g. MSG_SIZE_TOO_LARGE above message.max.bytes), the largest value it
accepts. An item `{config, "kind": "consumer"}` is a consumer's configuration: only whether
librdkafka accepts it. Nothing is sent: no broker is configured. `python -m acklab.workload.probe` reads the
items as JSON on stdin and writes the answers as JSON: `acklab.workload.librdkafka.probe` runs it with
another client's interpreter. Imports only the standard library and confluent_kafka."""

from __future__ import annotations

import json
import sys
from typing import Any


def _largest(producer: Any, key: bytes, value_bytes: int) -> int | None:
    from confluent_kafka import KafkaException

    def accepted(size: int) -> bool:
        try:
            producer.produce("acklab-size-probe", b"x" * size, key)
            return True
        except KafkaException:
            return False

    if accepted(value_bytes):
        return None
    low, high = 0, value_bytes  # accepted(low), not accepted(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if accepted(middle) else (low, middle)
    return low


def check(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`{"error": str | None, "largest": int | None}` per item (see the module docstring)."""
    from confluent_kafka import Consumer, KafkaException, Producer

    answers = []
    for item in items:
        if item.get("kind") == "consumer":
            try:
                Consumer({"group.id": "acklab-probe", **item["config"], "log_level": 0}).close()
                answers.append({"error": None, "largest": None})
            except KafkaException as exc:
                answers.append({"error": exc.args[0].str(), "largest": None})
            continue
        try:
            producer = Producer({**item["config"], "log_level": 0})
        except KafkaException as exc:
            answers.append({"error": exc.args[0].str(), "largest": None})
            continue
        try:
            answers.append({"error": None, "largest": _largest(producer, item["key"].encode(), item["value_bytes"])})
        finally:
            producer.purge()
            producer.flush(0)
    return answers


if __name__ == "__main__":
    json.dump(check(json.load(sys.stdin)), sys.stdout)

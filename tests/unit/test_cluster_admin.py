"""`ClusterAdmin.partitions` on a broker that has not learned a new topic yet (pure logic: the admin
client's metadata answers are scripted)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from acklab.cluster.admin import ClusterAdmin


class _Metadata:
    """Answers `list_topics` with the scripted topic errors in turn (None: the topic with one partition)."""

    def __init__(self, topic: str, errors: list[int | None]) -> None:
        self.topic, self.errors, self.asked = topic, errors, 0

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        error = self.errors[min(self.asked, len(self.errors) - 1)]
        self.asked += 1
        partition = SimpleNamespace(id=0, leader=1, replicas=[1, 2, 3], isrs=[1, 2, 3])
        metadata = SimpleNamespace(error=KafkaError(error) if error is not None else None, partitions={0: partition})
        return SimpleNamespace(topics={topic: metadata})


def _admin(client: _Metadata, timeout_s: float) -> ClusterAdmin:
    admin = ClusterAdmin.__new__(ClusterAdmin)
    admin._client, admin._timeout = client, timeout_s  # type: ignore[assignment]
    return admin


def test_a_topic_unknown_to_the_answering_broker_is_asked_again_until_it_is_known() -> None:
    client = _Metadata("t", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_OR_PART, None])
    [state] = _admin(client, 5).partitions("t")
    assert (state.leader, state.isr, client.asked) == (1, (1, 2, 3), 3)


def test_a_topic_still_unknown_at_the_timeout_and_any_other_error_are_raised() -> None:
    unknown = _Metadata("t", [KafkaError.UNKNOWN_TOPIC_OR_PART])
    with pytest.raises(KafkaException, match="Unknown topic"):
        _admin(unknown, 0.3).partitions("t")
    assert unknown.asked >= 2
    denied = _Metadata("t", [KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        _admin(denied, 5).partitions("t")
    assert denied.asked == 1

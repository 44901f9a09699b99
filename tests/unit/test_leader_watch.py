"""LeaderWatch's bookkeeping with a scripted admin (the real-cluster case is in
tests/integration/test_workload.py)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from acklab.nemesis import watch
from acklab.nemesis.watch import LeaderWatch


class ScriptedAdmin:
    """Answers `leaders` with the next scripted answer (the last one forever); an exception is raised."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Cluster:
    def __init__(self, admin: ScriptedAdmin) -> None:
        self._admin = admin

    def admin(self, timeout_s: float = 10.0) -> ScriptedAdmin:
        return self._admin


STEADY = {("t", 0): 1, ("t", 1): 2}
TIMEOUT = KafkaException(KafkaError(KafkaError._TIMED_OUT))


def _watch(answers: list[Any], monkeypatch: Any, polls: int) -> str | None:
    monkeypatch.setattr(watch, "POLL_S", 0.01)
    admin = ScriptedAdmin(answers)
    leader_watch = LeaderWatch(Cluster(admin), ["t"])  # type: ignore[arg-type]
    leader_watch.start()
    time.sleep(0.01 * polls + 0.2)
    change = leader_watch.stop()
    assert admin.closed, "the watch closes its admin client when it stops"
    return change


def test_steady_leaders_and_unanswered_polls_are_no_change(monkeypatch: Any) -> None:
    assert _watch([STEADY, TIMEOUT, TIMEOUT, STEADY], monkeypatch, polls=5) is None


def test_a_moved_or_missing_leader_is_the_first_change(monkeypatch: Any) -> None:
    change = _watch([STEADY, STEADY, {("t", 0): 1, ("t", 1): -1}, {("t", 0): 3, ("t", 1): -1}], monkeypatch, polls=5)
    assert change is not None and change.startswith("t[1] leader 2 -> -1 about ")


def test_a_change_seen_only_at_the_end_counts(monkeypatch: Any) -> None:
    monkeypatch.setattr(watch, "POLL_S", 60.0)  # no poll during the load: stop() looks once more
    leader_watch = LeaderWatch(Cluster(ScriptedAdmin([STEADY, {("t", 0): 2, ("t", 1): 2}])), ["t"])  # type: ignore[arg-type]
    leader_watch.start()
    assert leader_watch.stop() == leader_watch.change and "t[0] leader 1 -> 2" in (leader_watch.change or "")

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

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], tuple[int, frozenset[int]]]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return {key: value if isinstance(value, tuple) else (value, ALL) for key, value in answer.items()}


class Cluster:
    def __init__(self, admin: ScriptedAdmin, controllers: list[int] | None = None) -> None:
        self._admin, self._controllers = admin, controllers or [1]

    def admin(self, timeout_s: float = 10.0) -> ScriptedAdmin:
        return self._admin

    def active_controller(self) -> int:
        return self._controllers.pop(0) if len(self._controllers) > 1 else self._controllers[0]


ALL = frozenset({1, 2, 3})
STEADY = {("t", 0): 1, ("t", 1): 2}
TIMEOUT = KafkaException(KafkaError(KafkaError._TIMED_OUT))


def _watch(answers: list[Any], monkeypatch: Any, polls: int, controllers: list[int] | None = None) -> LeaderWatch:
    monkeypatch.setattr(watch, "POLL_S", 0.01)
    admin = ScriptedAdmin(answers)
    leader_watch = LeaderWatch(Cluster(admin, controllers), ["t"])  # type: ignore[arg-type]
    leader_watch.start()
    time.sleep(0.01 * polls + 0.2)
    leader_watch.stop()
    assert admin.closed, "the watch closes its admin client when it stops"
    return leader_watch


def test_steady_leaders_and_unanswered_polls_are_no_change(monkeypatch: Any) -> None:
    seen = _watch([STEADY, TIMEOUT, TIMEOUT, STEADY], monkeypatch, polls=5)
    assert (seen.change, seen.disturbances) == (None, [])


def test_a_moved_or_missing_leader_is_the_first_change(monkeypatch: Any) -> None:
    seen = _watch([STEADY, STEADY, {("t", 0): 1, ("t", 1): -1}, {("t", 0): 3, ("t", 1): -1}], monkeypatch, polls=5)
    assert seen.change is not None and seen.change.startswith("t[1] leader 2 -> -1 about ")
    assert [d.split(" about ")[0] for d in seen.disturbances] == ["t[1] leader 2 -> -1", "t[0] leader 1 -> 3"]  # each partition once


def test_isr_shrinks_and_controller_moves_are_recorded_without_being_a_leader_change(monkeypatch: Any) -> None:
    shrunk = {("t", 0): (1, frozenset({1, 3})), ("t", 1): 2}
    seen = _watch([STEADY, STEADY, shrunk, STEADY, shrunk], monkeypatch, polls=6, controllers=[1, 1, 2, 2])
    assert seen.change is None
    assert sorted(d.split(" about ")[0] for d in seen.disturbances) == ["controller 1 -> 2", "t[0] ISR {1,2,3} -> {1,3}"]
    assert seen.of_topic("t") == seen.disturbances and seen.of_topic("u") == [d for d in seen.disturbances if d.startswith("controller")]


def test_a_change_seen_only_at_the_end_counts(monkeypatch: Any) -> None:
    monkeypatch.setattr(watch, "POLL_S", 60.0)  # no poll during the load: stop() looks once more
    leader_watch = LeaderWatch(Cluster(ScriptedAdmin([STEADY, {("t", 0): 2, ("t", 1): 2}])), ["t"])  # type: ignore[arg-type]
    leader_watch.start()
    assert leader_watch.stop() == leader_watch.change and "t[0] leader 1 -> 2" in (leader_watch.change or "")

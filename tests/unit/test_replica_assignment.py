"""A group's replica assignment (`acklab.orchestration.execution.replica_assignment`): leaders
rotate with the group's index, and the active KRaft controller never leads a leader fault's target."""

from __future__ import annotations

import pytest

from acklab.orchestration.execution import replica_assignment


def test_leaders_rotate_with_the_group_index() -> None:
    firsts = [replica_assignment([1, 2, 3], 3, 3, index, controller=-1, targeted=[0])[0][0] for index in range(6)]
    assert firsts == [1, 2, 3, 1, 2, 3]
    assert replica_assignment([1, 2, 3], 3, 3, 1, -1, [0]) == [[2, 3, 1], [3, 1, 2], [1, 2, 3]]


@pytest.mark.parametrize("index", range(6))
@pytest.mark.parametrize("controller", [1, 2, 3])
def test_the_controller_never_leads_the_targeted_partition(index: int, controller: int) -> None:
    assignment = replica_assignment([1, 2, 3], 3, 3, index, controller, [0])
    assert assignment[0][0] != controller
    assert sorted(map(sorted, assignment)) == [[1, 2, 3]] * 3  # still every broker a replica of every partition
    assert [replicas[0] for replicas in assignment] in ([1, 2, 3], [2, 3, 1], [3, 1, 2])  # a rotation


def test_without_a_leader_target_or_a_choice_the_rotation_is_the_index() -> None:
    assert replica_assignment([1, 2, 3], 3, 3, 0, controller=1, targeted=[]) == replica_assignment([1, 2, 3], 3, 3, 0, -1, [])
    assert replica_assignment([1], 1, 1, 4, controller=1, targeted=[0]) == [[1]]  # one broker leads everything
    assert replica_assignment([1, 2, 3], 3, 3, 0, controller=2, targeted=[1])[1][0] != 2

"""Whom the heartbeat names when no rank progresses (the whole jobs are tests/test_grid_mpi.py's and, with a
node lost under load, tests/test_cross_node.py's): a rank that fell silent, even inside a collective,
before a rank that reports itself stuck outside one."""

from __future__ import annotations

import pytest

from ganstudy.parallel.heartbeat import Heartbeat


@pytest.fixture
def heartbeat():
    from mpi4py import MPI

    return Heartbeat(MPI.COMM_SELF, timeout=10, describe=lambda rank: f"host h{rank}")


def test_a_rank_that_died_inside_a_collective_is_named_by_its_silence(heartbeat):
    # Rank 1's node is lost while it waits in the exchange: it reported waiting, like rank 0 that it blocks,
    # and its last beat is later than rank 0's; only its reports stopped, 8 s ago.
    now = 100.0
    named = heartbeat._culprit(
        now,
        last_beat={0: 85.0, 1: 88.0, 2: 86.0},
        last_heard={0: now, 1: 92.0, 2: 99.5},
        waiting={0: True, 1: True, 2: True},
    )
    assert named == "rank 1 (host h1) stopped first, 8 s ago: it died or stalled (its heartbeat fell silent)"


def test_with_every_rank_heard_the_one_stuck_outside_a_collective_is_named(heartbeat):
    now = 100.0
    heard = {0: now, 1: 99.2, 2: 99.6}
    named = heartbeat._culprit(
        now, last_beat={0: 80.0, 1: 85.0, 2: 81.0}, last_heard=heard, waiting={0: True, 1: False, 2: True}
    )
    assert named == "rank 1 (host h1) stopped first, 15 s ago: it died or stalled"
    # All waiting (a collective no rank leaves): the one that stopped first.
    named = heartbeat._culprit(
        now, last_beat={0: 80.0, 1: 85.0, 2: 81.0}, last_heard=heard, waiting={0: True, 1: True, 2: True}
    )
    assert named == "rank 0 (host h0) stopped first, 20 s ago: it died or stalled"

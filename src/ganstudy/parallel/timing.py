"""Per-routine wall time, the raw material of seed 000's profile and speed-up tables."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RoutineTimer:
    """Accumulates seconds per routine name until ``take()`` hands them over and starts afresh."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, routine: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[routine] += time.perf_counter() - started

    def take(self) -> dict[str, float]:
        seconds, self._seconds = dict(self._seconds), defaultdict(float)
        return seconds


def profile_rows(history: list[dict[str, Any]], cell: str, rank: int) -> list[dict[str, Any]]:
    """profile.csv rows of a pair's training: a ``train`` routine per iteration and a ``score`` routine per
    in-training FID, from its history."""
    rows = []
    for row in history:
        rows.append(
            {"iteration": row["iteration"], "cell": cell, "rank": rank, "routine": "train", "seconds": row["seconds"]}
        )
        if row["score_seconds"]:
            rows.append(
                {
                    "iteration": row["iteration"],
                    "cell": cell,
                    "rank": rank,
                    "routine": "score",
                    "seconds": row["score_seconds"],
                }
            )
    return rows

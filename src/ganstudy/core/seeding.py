"""Every random stream of a study derives from (study seed, trial, named stream, ...).

Streams are independent of process layout: a cell or class gets the same numbers whichever
rank runs it, so results do not depend on the rank count.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _as_word(key: int | str) -> int:
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"seed keys are ints or strings, got {key!r}")
    if isinstance(key, int):
        if key < 0:
            raise ValueError(f"seed keys must be non-negative, got {key}")
        return key
    # Python's hash() of a str changes between processes; sha256 does not.
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")


def derive_seed(study_seed: int, *keys: int | str) -> int:
    """A 63-bit seed for the stream named by ``keys`` (e.g. ``trial, "train", "noise"``)."""
    entropy = [_as_word(study_seed), *(_as_word(k) for k in keys)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & (2**63 - 1)


# The named random streams of a generator-discriminator pair.
STREAMS = ("init", "batches", "noise", "dropout", "score")


def pair_seeds(study_seed: int, trial: int, prefix: str = "") -> dict[str, int]:
    """The named random streams of one pair; ``prefix`` (e.g. "class3/") keeps pairs of a run apart."""
    return {name: derive_seed(study_seed, trial, prefix + name) for name in STREAMS}

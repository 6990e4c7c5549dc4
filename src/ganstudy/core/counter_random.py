"""Counter-based random numbers: every draw is a pure function of a key and its index, not the next value
of a stream.

A stream (torch.Generator, numpy's Generator) hands out numbers in call order, so every cell, update and
row needs its own call, and a batch of cells cannot draw at once. Here a draw is a hash of (key, index):
any set of keys draws in one call of a few whole-tensor operations, on the CPU or on a GPU, and a key's
numbers do not depend on which other keys share the call. The hash is integer arithmetic, exact on every
device. The floats made from it use only operations that IEEE rounds exactly (+, -, *, /, sqrt, frexp,
comparisons): CPU kernels compute a tensor's last, partial vector with other code than the full ones,
and a transcendental function (log, cos) can differ there by an ulp, which would make a row's bits
depend on where it sits in the batch. Logarithm and sine/cosine are therefore polynomials here.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
import torch

from ganstudy.core.device_copy import to_device

MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
_BITS = 24  # of a uniform: exact in float32 and float64
_SQRT_HALF = math.sqrt(0.5)
_LN2 = math.log(2.0)


def mix64(value: int) -> int:
    """splitmix64's finaliser: nearby inputs give unrelated seeds."""
    return int(_mix64(_words(value))[0])


def counter_key(seed: int, *parts: int | str) -> int:
    """A 64-bit key for (seed, parts...): a cell's stream, an iteration, an update, a row; names are hashed
    with crc32, stable across runs. ``counter_keys`` makes many at once."""
    return int(counter_keys(seed, *parts)[0])


def counter_keys(seeds: int | Sequence[int] | np.ndarray, *parts: int | str | np.ndarray) -> np.ndarray:
    """``counter_key(seed, *parts)`` of every seed, as a uint64 array (at least 1-d), at numpy speed: a grid
    pass makes a key per cell, update and kind of draw, a million on the thesis's grid. A part may be an
    array of integers, broadcast against the seeds: ``counter_keys(seeds[None, :], "g", steps[:, None])``
    is [steps, seeds]."""
    value = _mix64(_words(seeds))
    for part in parts:
        value = _mix64(value ^ (np.uint64(zlib.crc32(part.encode())) if isinstance(part, str) else _words(part)))
    return value


def _words(values: int | Sequence[int] | np.ndarray) -> np.ndarray:
    """Integers as uint64, at least 1-d: Python ints modulo 2**64, an integer array's bits as they are."""
    if isinstance(values, np.ndarray):
        return np.atleast_1d(values.astype(np.uint64))
    return np.atleast_1d(np.asarray(values, dtype=object) & _MASK64).astype(np.uint64)


def _mix64(value: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of every element (uint64 arithmetic wraps modulo 2**64)."""
    value = value + np.uint64(0x9E3779B97F4A7C15)
    value = (value ^ (value >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    value = (value ^ (value >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return value ^ (value >> np.uint64(31))


def hash32(x: torch.Tensor) -> torch.Tensor:
    """C. Wellons' lowbias32 integer hash of an int64 tensor of values in [0, 2**32), in place.

    Tensors have no uint32 arithmetic on every device, and an int64 product past 2**63 is undefined in
    C++, so the values stay below 2**32 and the second multiplier, 0x846CA68B = 2**31 + 0x046CA68B, is
    applied as x * 0x046CA68B + (x << 31): no product exceeds 2**63, and the result is exact on any device.
    """
    x ^= x >> 16
    x.mul_(0x7FEB352D).bitwise_and_(MASK32)
    x ^= x >> 15
    odd = (x & 1) << 31
    x.mul_(0x046CA68B).add_(odd).bitwise_and_(MASK32)
    x ^= x >> 16
    return x


Keys = Sequence[int] | np.ndarray  # 64-bit keys: Python ints or a uint64 array (counter_keys)


def _row_words(keys: int | Keys, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 32-bit words per key, [rows, 1] each: the first picks the row's numbers, the second keeps two
    rows apart where their first words, combined with two indices, happen to coincide."""
    keys = _words(keys).reshape(-1, 1)
    words = np.concatenate([keys & np.uint64(MASK32), keys >> np.uint64(32)], axis=1).astype(np.int64)
    words = to_device(torch.from_numpy(words), device)
    return words[:, :1], words[:, 1:]


def _index_words(start: int, count: int, device: torch.device) -> torch.Tensor:
    return hash32(torch.arange(start, start + count, device=device))


def random_bits(keys: Keys, count: int, device: torch.device) -> torch.Tensor:
    """[len(keys), count] 32-bit values (int64): value j of row r is a hash of (keys[r], j)."""
    first, second = _row_words(keys, device)
    return hash32(hash32(first ^ _index_words(0, count, device)) ^ second)


# Elements of a dropout mask hashed at a time on a CPU: the hash's dozen whole-tensor passes then stay in
# the core's cache (3x faster than one pass over calo3d's 847k-element rows); a GPU hashes a mask in one go.
_CPU_BLOCK = 1 << 17


def scaled_mask(
    calls: int | Keys,
    first_row: int,
    shape: torch.Size,
    keep: float,
    dtype: torch.dtype,
    device: torch.device,
    whole: bool | None = None,
) -> torch.Tensor:
    """Dropout's mask divided by ``keep``, of shape ``shape``, whose rows (dim 0) are ``len(calls)`` equal
    blocks, one per call key (one call: the whole batch). Row first_row + s of a block and element e of
    that row: kept when the 32-bit hash of the row's key and the element's key, each a hash of (the
    block's call, the index), is below keep * 2**32. So a block's mask does not depend on the blocks
    beside it, nor on where the rows of a batch are cut (``first_row``). ``whole``: the mask in one pass
    of operators (a GPU's way, the default off the CPU), else in blocks of columns (all rows at once)
    that bound the work held in the CPU's cache; the bits do not depend on the block."""
    low, high = _row_words(calls, device)
    blocks = len(low)
    rows, per_row = shape[0] // blocks, shape[1:].numel()
    if rows * blocks != shape[0]:
        raise ValueError(f"a batch of {shape[0]} rows does not split into {blocks} equal blocks of dropout masks")
    # The rows' and the elements' keys hashed in one pass (a lone network's small masks cost operators, not arithmetic).
    keys = hash32(
        torch.cat(
            [
                torch.arange(first_row, first_row + rows, device=device) + low,
                torch.arange(per_row, device=device) + high,
            ],
            dim=1,
        ).bitwise_and_(MASK32)
    )
    row_keys, element_keys = keys[:, :rows], keys[:, rows:]
    mask = torch.empty(blocks, rows, per_row, dtype=dtype, device=device)
    threshold = round(keep * 2**32)
    whole = device.type != "cpu" if whole is None else whole
    columns = max(per_row, 1) if whole else max(1, _CPU_BLOCK // max(shape[0], 1))
    for start in range(0, per_row, columns):
        bits = hash32(row_keys[:, :, None] ^ element_keys[:, None, start : start + columns])
        mask[:, :, start : start + columns] = bits < threshold
    return mask.div_(keep).view(shape)


def uniform(keys: Keys, count: int, device: torch.device, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[len(keys), count] uniform values in [0, 1) on a grid of 2**-24."""
    return (random_bits(keys, count, device) >> (32 - _BITS)).to(dtype) * 2.0**-_BITS


def integers(keys: Keys, count: int, bounds: Sequence[int]) -> torch.Tensor:
    """[len(keys), count] integers on the host, row r's in [0, bounds[r]) (``bounded``)."""
    return bounded(random_bits(keys, count, torch.device("cpu")), bounds)


def bounded(bits: torch.Tensor, bounds: Sequence[int]) -> torch.Tensor:
    """Integers in [0, bounds[r]) from [rows, count] 32-bit values (``random_bits``): the top 24 bits scaled,
    exactly, by integer arithmetic; a bound up to 2**20 keeps its values within 2**-4 of equally likely."""
    return ((bits >> (32 - _BITS)) * torch.tensor(list(bounds), device=bits.device)[:, None]) >> _BITS


def _series(x2: torch.Tensor, coefficients: Sequence[float]) -> torch.Tensor:
    """sum_k c_k x2**k by Horner's rule, in place on a fresh tensor."""
    total = x2 * coefficients[-1]
    for c in reversed(coefficients[1:-1]):
        total.add_(c).mul_(x2)
    return total.add_(coefficients[0])


# Terms of each series, by dtype: enough for the dtype's precision over the reduced range.
_TERMS = {torch.float32: (5, 7), torch.float64: (8, 9)}


def _log(u: torch.Tensor) -> torch.Tensor:
    """ln u for u > 0: u = m * 2**e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(t), t = (m-1)/(m+1),
    |t| < 0.172: the series to t**9 (float32, error below 1e-9) or t**15 (float64, below 2e-13)."""
    m, e = torch.frexp(u)
    low = m < _SQRT_HALF
    m = torch.where(low, m * 2, m)
    e = (e - low.to(e.dtype)).to(u.dtype)
    t = (m - 1).div_(m + 1)
    series = _series(t * t, [1 / (2 * k + 1) for k in range(_TERMS[u.dtype][0])])
    return series.mul_(t).mul_(2).add_(e.mul_(_LN2))


def _sin_cos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """sin and cos of x in [0, pi/2) by their Taylor series (to x**11 and x**10 in float32, error below 6e-8;
    to x**17 and x**16 in float64, below 4e-12)."""
    terms = _TERMS[x.dtype][1]
    x2 = x * x
    sin = _series(x2, [(-1) ** k / math.factorial(2 * k + 1) for k in range(terms)]).mul_(x)
    cos = _series(x2, [(-1) ** k / math.factorial(2 * k) for k in range(terms)])
    return sin, cos


# Pairs of normals made at a time on a CPU: 27 ns per normal at 2**16, 39 at 2**14, 143 at 2**12 (the
# operators' fixed cost), no faster at 2**18 (AMD EPYC, one thread; torch.randn: 4.6 ns).
_CPU_PAIRS = 1 << 16


def normal(
    keys: Keys, count: int, device: torch.device, dtype: torch.dtype = torch.float32, whole: bool | None = None
) -> torch.Tensor:
    """[len(keys), count] standard normal values: Box-Muller on pairs of 24-bit uniforms (|z| < 5.9).
    ``whole``: all pairs in one pass of operators (a GPU's way, the default off the CPU), else _CPU_PAIRS
    at a time; the values are the same either way.

    A pair's uniforms come from one 32-bit hash of (key, pair) and one more hash of that. The angle is
    uniform in [0, pi/2) and each of the pair's values has a random sign: the same distribution as a
    uniform angle in [0, 2 pi) (a quadrant is [0, pi/2) turned or mirrored), with a sine and cosine
    needed on [0, pi/2) only.
    """
    first, second = _row_words(keys, device)
    pairs = -(-count // 2)
    out = torch.empty(len(keys), pairs, 2, dtype=dtype, device=device)
    whole = device.type != "cpu" if whole is None else whole
    width = pairs if whole else max(1, _CPU_PAIRS // max(len(keys), 1))
    for start in range(0, pairs, width):
        stop = min(pairs, start + width)
        a = hash32(hash32(first ^ _index_words(start, stop - start, device)) ^ second)
        b = hash32(a ^ 0x5BD1E995)
        radius = _log(((a >> (32 - _BITS)) + 1).to(dtype).mul_(2.0**-_BITS)).mul_(-2).sqrt_()
        sin, cos = _sin_cos((b >> (32 - _BITS)).to(dtype).mul_(2.0**-_BITS * (math.pi / 2)))
        # The low bits of b, unused by the angle, give the signs: +1 or -1 each.
        signs = ((b & 3) << 1).to(dtype).sub_(3)
        torch.mul(cos.mul_(radius), signs.clamp(-1, 1), out=out[:, start:stop, 0])
        torch.mul(sin.mul_(radius), (signs.abs_() - 2), out=out[:, start:stop, 1])
    return out.flatten(1)[:, :count]

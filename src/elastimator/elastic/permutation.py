"""A seeded shuffle of range(n) that is computed one position at a time.

The shard book hands an epoch's shards out in a shuffled order. Materializing
that order costs memory and time proportional to the epoch (10 million shards
would be a 10-million-entry list, rebuilt at every epoch and written into every
seal). `Permutation(n, key)[i]` instead computes the i-th element directly: a
small Feistel network is a bijection on the integers below a power of four, and
"cycle walking" (applying it again until the value falls below n) makes it a
bijection on range(n). The book then only keeps a cursor.
"""

from __future__ import annotations

_MASK64 = (1 << 64) - 1
_ROUNDS = 6


def _mix(value: int) -> int:
    """SplitMix64's finalizer: a fast, well-spread 64-bit hash of an integer."""
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB & _MASK64
    return value ^ (value >> 31)


class Permutation:
    """A pseudo-random bijection of range(n) chosen by `key`; `key` and n fix it (it is the same in every process)."""

    def __init__(self, n: int, key: int):
        if n < 0:
            raise ValueError(f"a permutation needs n >= 0; got {n}.")
        self.n = n
        self._half = max(1, ((max(n, 2) - 1).bit_length() + 1) // 2)  # the domain is 4**half >= n
        self._half_mask = (1 << self._half) - 1
        self._keys = [_mix(key * _ROUNDS + r + 1) for r in range(_ROUNDS)]

    def _encrypt(self, value: int) -> int:
        left, right = value >> self._half, value & self._half_mask
        for round_key in self._keys:
            left, right = right, left ^ (_mix(right ^ round_key) & self._half_mask)
        return (left << self._half) | right

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(f"position {index} is outside a permutation of {self.n}.")
        value = self._encrypt(index)
        while value >= self.n:  # at most 4x the domain, so a few steps on average
            value = self._encrypt(value)
        return value

    def __len__(self) -> int:
        return self.n

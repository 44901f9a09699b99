"""The record format (docs/evidence.md): key `p<n>-k<k>`, value `<id>:<seq>:` then padding.

Id and seq are zero-padded to one width per scenario (the digits of the largest id), so values are
built in bulk with numpy and the ids of delivery reports are parsed in bulk from their first bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acklab.workload.spec import id_width


@dataclass(frozen=True)
class ValueFormat:
    """Values of exactly `size` bytes carrying an id and a per-key sequence number."""

    width: int
    size: int

    @classmethod
    def for_ids(cls, max_id: int, size: int) -> ValueFormat:
        width = id_width(max_id)
        if size < 2 * width + 2:
            raise ValueError(f"message_bytes ({size}) must be >= {2 * width + 2} to hold the id and seq of {max_id + 1} messages")
        return cls(width, size)

    def values(self, base_id: int, lo: int, hi: int, keys: int) -> list[bytes]:
        """Values of a producer's messages `lo .. hi - 1` (id = base_id + index, seq = index // keys),
        built in bulk with numpy: digits are added to a template row of zeros and padding."""
        template = b"0" * self.width + b":" + b"0" * self.width + b":" + b"x" * (self.size - 2 * self.width - 2)
        rows = np.empty((hi - lo, self.size), dtype=np.uint8)
        rows[:] = np.frombuffer(template, dtype=np.uint8)
        first_seq = lo // keys
        seqs = np.arange(first_seq, (hi - 1) // keys + 1, dtype=np.uint64)
        seq_digits = np.repeat(self._digits(seqs), keys, axis=0)[lo - first_seq * keys : hi - first_seq * keys]
        rows[:, : self.width] += self._digits(np.arange(base_id + lo, base_id + hi, dtype=np.uint64))
        rows[:, self.width + 1 : 2 * self.width + 1] += seq_digits
        # One bytes object per row, made in C; numpy's fixed-width bytes drop trailing NULs, and a
        # value ends with its padding or its seq's ":".
        return rows.view(f"S{self.size}").ravel().tolist()

    def _digits(self, numbers: np.ndarray) -> np.ndarray:
        """Decimal digits of `numbers`, most significant first, `width` columns of uint8."""
        digits = np.empty((len(numbers), self.width), dtype=np.uint8)
        for column in range(self.width - 1, -1, -1):
            numbers, digits[:, column] = np.divmod(numbers, np.uint64(10))
        return digits

    def parse_ids(self, values: list[bytes]) -> np.ndarray:
        """Ids from values, or from their first `width` bytes (all items of one length)."""
        if not values:
            return np.zeros(0, dtype=np.int64)
        digits = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), -1)[:, : self.width] - ord("0")
        return digits.astype(np.int64) @ (10 ** np.arange(self.width - 1, -1, -1, dtype=np.int64))

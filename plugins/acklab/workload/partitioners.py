"""The partition librdkafka assigns to a keyed message, so the send log can record where it must land.

`consistent_random` (librdkafka's default) is CRC32 of the key modulo the partition count;
`murmur2_random` is the Java client's default: murmur2 of the key, made positive, modulo the count.
"""

from __future__ import annotations

import zlib

from acklab.workload.profiles import Partitioner

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2) as an unsigned 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length - whole
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def partition_for(key: bytes, partitions: int, partitioner: Partitioner) -> int:
    """The partition of `key` among `partitions` under `partitioner`."""
    if partitioner == "consistent_random":
        return zlib.crc32(key) % partitions
    return (murmur2(key) & 0x7FFFFFFF) % partitions

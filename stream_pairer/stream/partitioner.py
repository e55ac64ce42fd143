"""Which partition of an output topic a keyed record goes to: Kafka's default rule, computed once per key.

Why it is here and not left to the client: the sidecar produces whole batches per output
partition (`create_batch`/`send_batch`), so it must choose the partition itself, and keys must land
where `producer.send(key=...)` put them before (consumers of the output topics rely on a
conversation staying on one partition). The rule is the Java client's and aiokafka's
`DefaultPartitioner`: `(murmur2(key) & 0x7fffffff) % partition_count`, over the topic's own
partition count.

aiokafka's `murmur2` indexes the key byte by byte in Python (~10 µs for a 36-byte conversation id);
this one reads 4-byte words with `struct`, and `KeyPartitioner` caches the hash per key (a
conversation's key repeats for every output of it), bounded so that a stream of fresh keys cannot
grow it without limit. Pure: no I/O.
"""

from __future__ import annotations

import struct
from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data` (unsigned 32-bit), the same value as `aiokafka.partitioner.murmur2`
    and `org.apache.kafka.common.utils.Utils.murmur2` (as an unsigned int)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    for word in struct.unpack_from(f"<{words}I", data):
        k = (word * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail >= 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


class KeyPartitioner:
    """`partition(key, n)`: the default partitioner's choice for a non-null key among `n` partitions.

    The positive hash is cached per key (not the partition, so a topic whose partition count grows
    needs no invalidation); past `max_keys` distinct keys the cache starts over."""

    __slots__ = ("_hashes", "max_keys")

    def __init__(self, max_keys: int = 200_000) -> None:
        self.max_keys = max_keys
        self._hashes: dict[bytes, int] = {}

    def partition(self, key: bytes, n: int) -> int:
        h = self._hashes.get(key)
        if h is None:
            if len(self._hashes) >= self.max_keys:
                self._hashes.clear()
            h = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return h % n

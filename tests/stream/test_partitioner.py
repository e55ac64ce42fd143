"""stream.partitioner: the sidecar's own choice of output partition is the Kafka default partitioner's."""

from __future__ import annotations

import random

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from stream_pairer.stream.partitioner import KeyPartitioner, murmur2


def test_murmur2_is_the_clients_murmur2_for_every_length_and_byte() -> None:
    rng = random.Random(15)
    for length in range(70):
        for _ in range(40):
            data = rng.randbytes(length)
            assert murmur2(data) == aiokafka_murmur2(data), data
    assert murmur2(b"\xff" * 9) == aiokafka_murmur2(b"\xff" * 9)  # high bytes (signedness in Java)
    # The Java client's own vectors (UtilsTest.testMurmur2; Java's int is signed, ours unsigned)
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    }
    for data, signed in vectors.items():
        assert murmur2(data) == signed % (1 << 32), data


def test_key_partitioner_agrees_with_the_default_partitioner_and_stays_bounded() -> None:
    rng = random.Random(7)
    part = KeyPartitioner(max_keys=50)
    keys = [f"conv-{rng.getrandbits(64):x}".encode() for _ in range(400)] + [b"", b"x"]
    for n in (1, 2, 3, 4, 7, 12):
        for key in keys:
            assert part.partition(key, n) == DefaultPartitioner()(key, list(range(n)), list(range(n)))
    assert len(part._hashes) <= 50  # a stream of fresh keys does not grow it

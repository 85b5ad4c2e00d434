from engine.produce.partitioner import StickyPartitioner, murmur2, partition_for_key


def test_murmur2_matches_kafka_published_vectors():
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, expected in cases.items():
        assert murmur2(key) == expected


def test_key_partition_is_positive_modulo():
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7


def test_sticky_rotates_per_call():
    s = StickyPartitioner()
    assert [s.next(3) for _ in range(4)] == [0, 1, 2, 0]

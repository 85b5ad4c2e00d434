"""What encryption at rest reports as damage (exit 3), on every read path and in ``segment
verify``: a batch whose header names a data key version the catalog does not hold, and a
plaintext batch where the partition records that every batch is sealed."""

from __future__ import annotations

import struct

import pytest
from helpers.encryption import ENC, batches_of, marker, reseal_crc, segment_files

from engine import Engine, Record
from engine.errors import CorruptRecordError

KEY_VERSION_AT = 22  # the header's data key version (uint16, docs/FORMAT.md)


def set_version(version: int):
    def edit(buf: bytearray) -> None:
        struct.pack_into("<H", buf, KEY_VERSION_AT, version)
    return edit


# ---------------------------------------------------------------- unknown key versions
def test_a_batch_naming_a_key_version_the_catalog_lacks_is_damage(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        for i in range(3):
            eng.produce("t", [Record(value=marker(i))])
    path = segment_files(data_dir, "t")[0]
    (p0, _), (p1, _), (p2, _) = batches_of(path)
    reseal_crc(path, p1, set_version(7))
    reseal_crc(path, p2, set_version(9))
    with Engine.open(data_dir, keyring=keyring) as eng:
        assert eng.read("t", 0, 0, 1)[0].value == marker(0)  # the batch before it
        with pytest.raises(CorruptRecordError) as e:
            eng.read("t", 0, 1, 1)
        assert e.value.exit_code == 3
        msg = str(e.value)
        assert "offsets 1..1" in msg and f"{path} at position {p1}" in msg
        assert "data key version 7" in msg and "topics.json" in msg
        # verify lists both and goes on to the end
        found = eng.segments.verify(["t"], decrypt=True)["findings"]
        assert [(f["kind"], f["position"]) for f in found] == [("body", p1), ("body", p2)]
        assert "data key version 9" in found[1]["message"]

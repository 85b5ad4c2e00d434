"""Layer 4 — the files of a partition directory, each on its own: segments and their indexes,
the recovery point, the replacement protocol, the aborted-transaction index, the
producer-state snapshot files, the tier manifest, the sealed ranges, the recorded gaps. A file
here knows its own bytes and rules, never the partition object that composes them
(``engine.storage.log``).

May import: ``engine.fs``, ``engine.format`` and the base modules.

- ``filenames``: the names of a partition directory's files, the install and delete order
- ``index``: ``.index`` and ``.timeindex`` (one ``Index`` class, two entry kinds)
- ``segment``: one segment: scan, load, repair a torn tail, write, indexes
- ``damage``: damage in a segment's log, the next intact batch past it, refusing it
- ``segment_set``: a partition's segments in offset order; roll; delete the oldest
- ``checkpoint``: ``.checkpoint``, the recovery point and log start offset, sealed
- ``durable_end``: ``.end``, the durable end every reader stops at (mapped, not fsynced)
- ``swap``: the one segment-replacement protocol (``.cleaned`` -> ``.swap`` -> final)
- ``txn_index``: ``.txnindex``, the aborted transactions of a segment
- ``snapshot_files``: ``<offset>.snapshot``, the producer-state snapshots (their bytes are
  ``engine.txn.snapshot``'s)
- ``tier_manifest``: ``tier.json``, which offsets are cold and where
- ``sealed_range``: ``encryption.json``, the offsets where every data batch is sealed
- ``gaps``: ``.gaps``, the offsets a repair cut out (a recorded gap, as compacted ones)
"""

"""Layer 3 — this process's counters and histograms, in ``.stats/`` files every process can
read (docs/METRICS.md); ``engine.metrics`` exposes them with the data dir's state.

May import: ``engine.fs`` (its file rules: no links followed, modes, atomic writes, locks) and
the base modules.

Storage never imports this package: a ``PartitionLog`` is handed its counters
(``PartitionMeter``), as it is handed its WAL stream.

- ``names``: every metric rivven exposes: name, type, labels, meaning; the slots each kind of
  series takes
- ``slots``: a process's memory-mapped file of series values, and its list of series
- ``meter``: ``Meter`` (the series of one engine) and its counter, histogram, gauge and run
  handles; ``PartitionMeter`` (a partition's, handed to storage)
- ``gather``: every process's series summed: live ones read, dead ones merged once into
  ``.stats/retired.json`` (the rule: counted exactly once, never lost to kill -9)
"""

"""What the façade's own calls return: typed rows (dicts at run time, printed as they are by
the commands' ``--json``). Each service's results are in its layer's ``results`` module."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from .wal.results import ReplayReport

if TYPE_CHECKING:  # (annotations only: listing topics imports nothing of engine.txn)
    from .storage.catalog import TopicMeta
    from .txn.results import DecisionRecovered, RecoveredTransaction


class RecoveryReport(ReplayReport, total=False):
    """What a writable open recovered (``Engine.last_recovery``): the WAL replay's report
    (``streams, partitions, applied, skipped, dropped, torn_tails``, ``kept``), or
    ``deferred`` (a full disk: the replay waits for the next open); then the two-phase
    ``decisions`` finished and the ``transactions`` recovered (engine.txn.results.AfterCrash)."""

    decisions: list[DecisionRecovered]
    transactions: list[RecoveredTransaction]


class TopicDeleted(TypedDict):
    topic: str
    deleted: bool  # False: there was no such topic (if_exists)
    cold_prefixes: list[str]  # the cold-store prefixes removed
    problems: list[str]  # damaged tier manifests, whose objects were left in place


class ConfigKey(TypedDict):
    """One topic config key (``TopicAdmin.config_keys``)."""

    key: str
    default: str
    kind: str  # Kafka's config type: boolean, string, int, long, double or list
    doc: str


class TopicEnsured(TypedDict):
    """What ``TopicAdmin.create`` did."""

    topic: TopicMeta
    created: bool
    not_applied: list[str]  # an existing topic's: "partitions", "config" it was asked for

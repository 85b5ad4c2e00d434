"""``TopicAdmin`` (``Engine.topic_admin``): creating, deleting, altering and describing the
topics of a data dir (Kafka's createTopics, deleteTopics, alterConfigs, createPartitions,
describeTopics). The catalog's own rules are engine.storage.topics'; here a topic's cold
store is checked when it is set, its cold objects removed with it, its partitions closed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .errors import UnknownTopic
from .results import ConfigKey, TopicDeleted, TopicEnsured
from .storage.catalog import TopicMeta
from .storage.config import KEYS
from .storage.finder import LogFinder
from .storage.topics import Topics, not_applied
from .tiering import cold
from .tiering.tier_pass import topic_prefixes
from .tools.inspect import describe_topic
from .tools.results import TopicDescription


class TopicAdmin:
    """The topics of ``topics`` (the catalog) and their logs (``find``); ``writable()``
    raises when the engine is read-only."""

    def __init__(self, data_dir: str, topics: Topics, find: LogFinder,
                 writable: Callable[[], None]) -> None:
        self.data_dir = data_dir
        self.topics = topics
        self.find = find
        self.writable = writable

    def create(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
               if_not_exists: bool = False) -> TopicEnsured:
        """A new topic: TopicExists when one of that name exists, unless ``if_not_exists``:
        then it is left unchanged and ``not_applied`` says what the call asked that it does
        not have (``partitions``, ``config``). Returns ``topic`` (its metadata) and
        ``created``."""
        self.writable()
        cold.check_config_store(config or {})  # (now, not when tiering first runs)
        meta, created = self.topics.ensure(name, partitions, config or {}, if_not_exists)
        return {"topic": meta, "created": created,
                "not_applied": [] if created else not_applied(meta, partitions, config or {})}

    def check_create(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> TopicMeta:
        """What ``create`` would make, nothing written (Kafka's validate_only): the same
        errors, TopicExists when it exists."""
        cold.check_config_store(config or {})
        return self.topics.check_new(name, partitions, config or {})

    def delete(self, name: str, if_exists: bool = False) -> TopicDeleted:
        """Remove a topic and all its files; producers to it get UnknownTopic from then on.
        Returns ``deleted`` (False: there was no such topic, with ``if_exists``),
        ``cold_prefixes`` (the cold-store prefixes removed: the configured one, and those its
        tier manifests recorded) and ``problems``: damaged tier manifests, whose objects
        outside the configured prefix are left in place (never acted on)."""
        self.writable()
        try:
            prefixes, problems = self.topics.delete(
                name, lambda m: topic_prefixes(self.data_dir, m))
        except UnknownTopic:
            if not if_exists:
                raise
            return {"topic": name, "deleted": False, "cold_prefixes": [], "problems": []}
        self.find.partitions.forget(name)
        cold.remove_trees(prefixes)  # its cold objects (the topic id keeps a new one apart)
        return {"topic": name, "deleted": True, "cold_prefixes": sorted(prefixes),
                "problems": problems}

    def alter_config(self, name: str, set: dict[str, str] | None = None,
                     delete: Sequence[str] = (), replace: bool = False,
                     validate_only: bool = False, append: dict[str, str] | None = None,
                     subtract: dict[str, str] | None = None) -> TopicMeta:
        """Set configs (``set``) and return others to their defaults (``delete``); with
        ``replace`` the topic keeps ``set`` alone, every other config back to its default
        (Kafka's AlterConfigs). ``append``/``subtract``: values added to or removed from a
        list config (cleanup.policy), from its current value (Kafka's APPEND, SUBTRACT).
        ``validate_only``: the checks, nothing written; the metadata the topic would have."""
        if not validate_only:
            self.writable()
        cold.check_config_store(set or {})
        return self.topics.alter_config(name, set or {}, delete, replace, validate_only,
                                        append, subtract)

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicMeta:
        """Grow the topic to ``total`` partitions (never fewer); ``validate_only``: the
        checks, nothing written."""
        if not validate_only:
            self.writable()
        return self.topics.add_partitions(name, total, validate_only)

    def config_keys(self) -> list[ConfigKey]:
        """Every topic config key, by name: its default, Kafka's type for it, what it does."""
        return [{"key": k.name, "default": k.default, "kind": k.kind, "doc": k.doc}
                for _, k in sorted(KEYS.items())]

    def describe(self, name: str) -> TopicDescription:
        """Its configs (with their source) and per partition: offsets, segments, bytes."""
        return describe_topic(self.find.topic(name), self.find.logs(name))

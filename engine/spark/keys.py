"""The data keys of an encrypted topic for Spark: unwrapped where the keyring is (the
launcher, or the driver of a user's own job), then carried to the executors inside the
pickled reader or task, never written to a file or put on a command line.

Our jobs get them from the launcher in the environment of ``spark-submit`` (``RIVVEN_SPARK_KEYS``:
only the keys of the job's topic; readable by the same user alone, as the keyring is). A
user's own Spark application reading an encrypted topic with the ``rivven`` source names its
keyring instead: ``.option("keyring", FILE)`` or ``RIVVEN_KEYRING`` where the driver runs.
Between the driver and the executors the keys travel in Spark's task messages: on a cluster
turn on ``spark.network.crypto.enabled`` (and ``spark.io.encryption.enabled`` for shuffle
files; the launcher sets the latter for encrypted topics).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from ..crypto.keyring import resolve
from ..crypto.topic import StaticKeys, TopicKeys
from ..errors import KeyUnavailable
from ..storage.catalog import Catalog

ENV = "RIVVEN_SPARK_KEYS"


def export(keys: StaticKeys) -> str:
    """``keys`` as the value of ``RIVVEN_SPARK_KEYS``."""
    return json.dumps({"id": keys.id, "current": keys.current,
                       "keys": {str(v): [c, base64.b64encode(k).decode()]
                                for v, (c, k) in keys.keys.items()}})


def from_env(topic_id: str) -> StaticKeys | None:
    """The keys ``RIVVEN_SPARK_KEYS`` holds for the topic ``topic_id``, or None."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    doc = json.loads(raw)
    if doc.get("id") != topic_id:
        return None
    return StaticKeys(topic_id, {int(v): (c, base64.b64decode(k))
                                 for v, (c, k) in doc["keys"].items()}, int(doc["current"]))


def for_topic(data_dir: str, topic: str, keyring: Any = None) -> StaticKeys | None:
    """The keys a Spark reader of ``topic`` needs (None: the topic never encrypted): from
    ``RIVVEN_SPARK_KEYS``, else unwrapped with ``keyring`` (a path; default
    ``RIVVEN_KEYRING``)."""
    meta = Catalog(data_dir).get(topic)
    if meta is None or meta.keys is None:
        return None
    found = from_env(meta.id)
    if found is not None:
        return found
    tk = TopicKeys(meta.name, meta.id, meta.keys, resolve(keyring))
    try:
        return tk.portable()
    except KeyUnavailable as e:
        raise type(e)(f"{e}; in Spark: .option(\"keyring\", FILE) on the rivven source, or "
                      "RIVVEN_KEYRING set before the SparkSession starts (where its driver "
                      "runs)") from None

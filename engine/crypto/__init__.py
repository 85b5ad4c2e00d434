"""Layer 3 — encryption at rest: master keys (the keyring, outside the data dir), a topic's
data keys (wrapped by a master key, kept in the catalog), and sealing and opening batch bodies
(docs/ENCRYPTION.md).

May import: ``engine.format`` (the sealed batch's bytes) and the base modules.

Every cipher is the ``cryptography`` package's (AES-256-GCM, ChaCha20-Poly1305, HKDF-SHA256);
nothing here is a primitive written by hand. Storage imports this layer to seal batches as they
are appended and to open them as they are read.

- ``keyring``: master keys by id: a JSON file of base64 keys (mode 0600), or any object with
  ``get(key_id) -> bytes`` (a KMS)
- ``ciphers``: the two AEADs, wrapping a data key under a master key, session keys
- ``keyset``: a topic's data key versions as the catalog stores them (wrapped)
- ``keyops``: a first data key, a rotation, a rewrap
- ``batch``: ``Sealer`` (one writer session per data key: a random salt, counted nonces) and
  ``Opener`` (session keys cached), over engine.format.sealed's layout
- ``topic``: ``TopicKeys``, a topic's keys in an engine (unwrapped when first needed),
  ``Vault``, the engine's keyring and its topics' keys, ``OffsetMetadata`` (sealed commit
  metadata)
"""

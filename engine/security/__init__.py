"""Layer 3 — who may connect and what they may do: SCRAM credentials (``users``) and Kafka's
ACLs (``acl``: the model and the decision; ``acls``: the stored bindings), kept in the data
dir's ``security/`` directory (0700, files 0600, sealed JSON). ``rivven serve`` (engine.kafka)
authenticates and authorizes with them; ``rivven user`` and ``rivven acl`` manage them.

May import: ``engine.fs`` (sealed documents, locks, atomic writes) and the base modules.
"""

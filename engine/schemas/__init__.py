"""Layer 9 — schemas: a registry with Confluent's REST API kept in the data dir's compacted
``_schemas`` topic, the three schema types (AVRO, PROTOBUF, JSON) with their compatibility
rules, and Confluent's wire format (docs/SCHEMAS.md).

May import: ``engine.security`` (the SCRAM users and the ACL decision the REST API's
access follows), ``engine.fs`` (the lock that orders writers across processes, the id
high-water file) and the base modules.
The topic is read and written through the ``SchemaLog`` port the façade hands the registry.

- ``errors``: Confluent's error codes as exceptions
- ``kinds``: the interface every schema type implements, ``parse`` picking one by name
- ``avro``, ``json_schema``, ``protobuf`` (+ their ``*_compat``): the types (fastavro, avro,
  jsonschema, protobuf + grpc_tools' protoc)
- ``avro_values`` (the compiler of a schema's value converters), ``avro_convert`` (the
  leaf converters), ``avro_logical`` (the logical types): JSON <-> Avro values
- ``json_compat``'s parts: ``json_model`` (schemas as Confluent's loader reads them),
  ``json_diff`` (the walk), ``json_diff_scalars``, ``json_diff_combined``,
  ``json_diff_content`` (the rules by kind), ``json_messages`` (Confluent's words)
- ``serde``: Confluent's wire format: magic byte 0, the 4-byte id, the payload
- ``records``: the ``_schemas`` topic's keys and values, as Confluent's registry writes them
- ``view``: the registry's state, rebuilt from the topic's records
- ``arguments``: the registry's arguments checked (versions, levels, subjects, references)
- ``registry``: ``Registry`` (``Engine.schemas``): the operations of the REST API
- ``http``: the REST API's routes; ``server``: the HTTP/1.1 listener (httptools),
  ``server_conn``: one connection of it (keep-alive, bounds, authentication, the routes);
  ``access``: HTTP basic auth against the SCRAM users, ACLs over subjects
"""

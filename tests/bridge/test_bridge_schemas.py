"""The schema registry travels with its data: ``_schemas`` exported to a cluster (a ``rivven
serve``) and imported into another data dir is a registry there, with the same ids, so the
records copied beside it still decode."""

from __future__ import annotations

import json

from helpers.bridge import (  # noqa: F401
    served_fixture,
    sink_fixture,
    source_fixture,
)

from engine import Record
from engine.bridge.export import export
from engine.bridge.importer import import_topics

ORDER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
ORDER2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "qty", "type": "int", "default": 1}]})


def test_the_registry_and_its_records_go_out_and_back_and_still_decode(source, sink, served):
    r = source.schemas
    r.register("orders-value", ORDER)
    r.register("orders-value", ORDER2)
    r.register("other-value", '"string"')
    r.delete_subject("other-value")
    r.set_config("orders-value", "FULL")
    source.create_topic("orders", 2)
    ser = r.serializer("orders-value")
    source.produce("orders", [Record(value=ser({"id": i, "item": f"i{i}", "qty": i}))
                              for i in range(10)], partition=0)
    export(source, ["_schemas", "orders"], served.bootstrap)
    back = import_topics(sink, ["_schemas", "orders"], served.bootstrap)
    assert sorted(back["created"]) == ["_schemas", "orders"]
    assert sink.topic("_schemas").config["cleanup.policy"] == "compact"
    s = sink.schemas
    assert s.subjects() == ["orders-value"] and s.subjects(deleted=True) == [
        "orders-value", "other-value"]
    assert s.version("orders-value", "latest") == r.version("orders-value", "latest")
    assert s.config("orders-value") == {"compatibilityLevel": "FULL"}
    de = s.deserializer()
    assert [de(rec.value) for rec in sink.read("orders", 0, 0)] == [
        {"id": i, "item": f"i{i}", "qty": i} for i in range(10)]
    # and the copy goes on giving new ids after the highest it holds
    assert s.register("new-value", '"long"') == {"id": 4}

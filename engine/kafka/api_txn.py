"""InitProducerId (idempotent producers; transactional ids: engine.kafka's transaction APIs).

An idempotent producer gets a new producer id at epoch 0, from a block the broker takes from
the data dir's producer ids at a time (durable before any is handed out), as Kafka's
brokers take blocks from the controller."""

from __future__ import annotations

import threading
from typing import Any

from . import codes
from .registry import Request, api

BLOCK = 1000


class ProducerIds:
    """Producer ids handed out from blocks taken from the data dir."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._next = self._end = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._next = self._engine.txn.allocate_producer_ids(BLOCK)
                self._end = self._next + BLOCK
            pid = self._next
            self._next += 1
            return pid


@api(22, "InitProducerId", 0, 4)
def init_producer_id(req: Request) -> Any:
    b, body = req.broker, req.body
    if body.transactional_id is not None:
        txns = b.txns
        if txns is None:
            return req.respond(throttle_time_ms=0, error_code=codes.UNSUPPORTED_VERSION,
                               producer_id=-1, producer_epoch=-1)
        return txns.init_producer_id(req)
    if b.producer_ids is None:
        b.producer_ids = ProducerIds(b.engine)
    return req.respond(throttle_time_ms=0, error_code=0, producer_id=b.producer_ids.next(),
                       producer_epoch=0)

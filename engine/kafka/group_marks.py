"""A group's mark in the data dir, held by the coordinator (groups.py) while the group has
members (or members asked to rejoin with the id they were given): ``eng.groups.claim``'s
``ProtocolMark``, a member file of kind kafka, flocked, so native consumers of the group
refuse to join and other processes see its members (``rivven group describe``). Its members
are published there after each change: one writer per group on the thread pool, the latest
state each time; the mark goes once the group has no member."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..errors import GroupKindConflict, RivvenError
from . import codes
from .consumer_protocol import subscription_topics
from .group_state import CONSUMER, Group

log = logging.getLogger("rivven.serve")

MAX_SHOWN_TEXT = 255  # a client id or host is cut to this in the details other processes read


class Marks:
    """The coordinator's groups in the data dir. Runs on the event loop; the file work
    awaits the broker's thread pool. ``forget(group)`` (the coordinator's) takes an idle
    group out of memory once its mark is gone."""

    def __init__(self, broker: Any, loop: asyncio.AbstractEventLoop,
                 forget: Callable[[Group], None]) -> None:
        self.broker = broker
        self.loop = loop
        self.forget = forget

    def touch(self, group: Group) -> None:
        """Publish the group's members to the data dir (or let the mark go once it has
        none): one writer per group, on the thread pool, the latest state each time."""
        group.dirty = True
        if group.writer is None or group.writer.done():
            group.writer = self.loop.create_task(self._write(group))

    async def _write(self, group: Group) -> None:
        async with group.mark_lock:
            while group.dirty:
                group.dirty = False
                mark = group.mark
                if mark is None:
                    return
                try:
                    if not group.has_members():
                        group.mark = None
                        await self.broker.call(mark.close)
                        self.forget(group)
                        return
                    await self.broker.call(mark.publish, self.details(group))
                except Exception:  # (a full disk: describe shows less; the group goes on)
                    log.exception("group %s: cannot write its members to the data dir",
                                  group.group_id)

    async def claim(self, group: Group) -> int:
        """The group's mark taken (error NONE), or why not."""
        async with group.mark_lock:
            if group.mark is not None:
                return codes.NONE
            b = self.broker
            try:
                group.mark = await b.call(b.engine.groups.claim, group.group_id,
                                          {"client_id": "rivven serve",
                                           "listener": b.advertised()})
            except GroupKindConflict as e:
                log.info("JoinGroup of %s refused: %s", group.group_id, e)
                return codes.INCONSISTENT_GROUP_PROTOCOL
            except RivvenError as e:
                log.warning("JoinGroup of %s failed: %s", group.group_id, e)
                return codes.code_of(e)
        self.touch(group)
        return codes.NONE

    def details(self, group: Group) -> dict[str, Any]:
        """What other processes read about the group (``rivven group describe``)."""
        return {"state": group.state, "protocol_type": group.protocol_type,
                "protocol": group.protocol_name, "generation": group.generation,
                "leader": group.leader,
                "listener": self.broker.advertised(),
                "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                             "client_id": m.client_id[:MAX_SHOWN_TEXT],
                             "host": m.host[:MAX_SHOWN_TEXT], "joined": m.joined_ms,
                             "topics": sorted(subscription_topics(m.metadata(
                                 group.protocol_name or (m.names() or [""])[0])) or ())
                             if m.protocol_type == CONSUMER else [],
                             "assignment": m.assigned or []}
                            for m in group.members.values()]}

    def release(self, group: Group) -> None:
        """The mark let go now (the server stops: closed on the event loop)."""
        if group.mark is not None:
            group.mark.close()
            group.mark = None

"""The data dir's ACLs, ``Engine.acls`` (``rivven acl``, Kafka's CreateAcls, DescribeAcls,
DeleteAcls): Kafka's bindings stored in ``security/acls.json`` (sealed, 0600), and the
``Authorizer`` over them, built again when the file changes (by this process or another:
a running ``rivven serve`` applies a change at its next request)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..fs.jsondoc import damaged
from ..fs.locks import DEFAULT_WAIT, LockWait
from .acl import Acl, AclFilter, Authorizer
from .results import AclInfo
from .store import SecureDoc

MAX_ACLS = 1_000_000

List = list  # (the services have a method named list)


class Acls:
    def __init__(self, data_dir: str, writable: Callable[[], None],
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self._doc = SecureDoc(data_dir, "acls.json", "the ACL file", "acls", lock_wait)
        self._writable = writable
        self._built: tuple[Any, tuple[frozenset[str], bool], Authorizer] | None = None

    @property
    def path(self) -> str:
        return self._doc.path

    def bindings(self) -> List[Acl]:
        return self._parse(self._doc.read())

    def authorizer(self, super_users: Iterable[str] = (),
                   allow_everyone_if_no_acl_found: bool = False) -> Authorizer:
        """The decision over the ACLs as stored now (the same object while neither the file
        nor the settings change: a ``stat`` per call)."""
        raw = self._doc.read()
        settings = (frozenset(super_users), allow_everyone_if_no_acl_found)
        built = self._built
        if built is None or built[0] is not raw or built[1] != settings:
            auth = Authorizer(self._parse(raw), settings[0], settings[1])
            self._built = built = (raw, settings, auth)
        return built[2]

    def list(self, f: AclFilter | None = None) -> List[AclInfo]:
        f = f or AclFilter()
        return [a.to_json() for a in sorted(self.bindings()) if f.matches(a)]

    def add(self, acls: Sequence[Acl]) -> List[AclInfo]:
        """Store ``acls`` (one already stored is kept once); returns those new."""
        self._writable()
        for a in acls:
            if not isinstance(a, Acl):
                raise InvalidArgument(f"{a!r} is not an Acl: make one with Acl.make(...)")

        def change(raw: List[Any]) -> tuple[list | None, List[AclInfo]]:
            have = set(self._parse(raw))
            new = [a for a in dict.fromkeys(acls) if a not in have]
            if not new:
                return None, []
            if len(have) + len(new) > MAX_ACLS:
                raise InvalidArgument(f"more than {MAX_ACLS} ACLs: remove some first")
            return [a.to_json() for a in sorted(have | set(new))], [a.to_json() for a in new]
        return self._doc.update(change)

    def remove(self, filters: Sequence[AclFilter]) -> List[List[AclInfo]]:
        """Delete every binding each filter matches; per filter, what it deleted."""
        self._writable()

        def change(raw: List[Any]) -> tuple[list | None, List[List[AclInfo]]]:
            have = self._parse(raw)
            out = [[a.to_json() for a in have if f.matches(a)] for f in filters]
            gone = {a for a in have if any(f.matches(a) for f in filters)}
            if not gone:
                return None, out
            return [a.to_json() for a in have if a not in gone], out
        return self._doc.update(change)

    def _parse(self, raw: List[Any]) -> List[Acl]:
        out = []
        for i, e in enumerate(raw):
            try:
                if not isinstance(e, dict):
                    raise InvalidArgument("not an object")
                out.append(Acl.make(e["resource_type"], e["name"], e["pattern_type"],
                                    e["principal"], e["host"], e["operation"], e["permission"]))
            except (KeyError, TypeError, InvalidArgument) as err:
                raise damaged(self._doc.path, "the ACL file", f"entry {i}: {err}",
                              "restore it from a backup, or remove it and add the ACLs "
                              "again") from None
        return out

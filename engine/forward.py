"""``Forward``: a name earlier releases documented on ``Engine`` whose job is now a service's
(``eng.compact`` is ``eng.maintenance.compact``): one line on the class, the service's method
itself when looked up (its signature and docstring)."""

from __future__ import annotations

from typing import Any


class Forward:
    def __init__(self, service: str, name: str | None = None) -> None:
        self.service = service
        self.name = name

    def __set_name__(self, owner: type, attr: str) -> None:
        if self.name is None:
            self.name = attr
        self.__doc__ = f"``{attr}``: the same as ``{self.service}.{self.name}``."

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.service), self.name or "")

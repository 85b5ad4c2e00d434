"""The façade's two descriptors: ``Lazy``, a part or service built on first use (so a command
that only lists topics never imports the produce path, transactions or maintenance), and
``Forward``, a name earlier releases documented on ``Engine`` whose job is now a service's
(``eng.compact`` is ``eng.maintenance.compact``)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


def new(module: str, name: str, *args: Any) -> Any:
    """``name(*args)`` of ``engine<module>`` (``".groups.admin"``), imported now."""
    return getattr(importlib.import_module(module, "engine"), name)(*args)


class Lazy(Generic[T]):
    """``build(instance)`` on the first look, then the instance's own attribute (built once,
    also when two threads look at once)."""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self.build = build
        self.name = ""
        self.lock = threading.Lock()

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Lazy[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with self.lock:
            found = obj.__dict__.get(self.name, self)
            if found is self:
                found = obj.__dict__[self.name] = self.build(obj)
        return found


class Forward:
    """One line on the class; the service's own bound method when looked up."""

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

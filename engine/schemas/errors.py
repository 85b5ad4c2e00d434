"""Confluent's schema registry errors: each carries its ``error_code`` (the HTTP status is
the code's first three digits) and Confluent's message, so clients recognise them."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument, RivvenError, plural


class RegistryError(RivvenError):
    """An error with Confluent's ``error_code``; ``status`` is its HTTP status."""

    code = 50001

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def status(self) -> int:
        return self.code if self.code < 1000 else self.code // 100

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": str(self)}


class SubjectNotFound(RegistryError):
    code = 40401


class VersionNotFound(RegistryError):
    code = 40402


class SchemaNotFound(RegistryError):
    code = 40403


class SubjectSoftDeleted(RegistryError):
    code = 40404


class SubjectNotSoftDeleted(RegistryError):
    code = 40405


class VersionSoftDeleted(RegistryError):
    code = 40406


class VersionNotSoftDeleted(RegistryError):
    code = 40407


class SubjectConfigNotFound(RegistryError):
    code = 40408


class IncompatibleSchema(RegistryError):
    code = 40901

    @property
    def status(self) -> int:
        return 409


class InvalidSchema(RegistryError):
    """A schema that does not parse, or names a reference that does not resolve (42201)."""

    code = 42201


class InvalidVersion(RegistryError):
    code = 42202


class InvalidCompatibility(RegistryError):
    code = 42203


class ReferenceExists(RegistryError):
    code = 42206


class InvalidSubject(RegistryError):
    code = 42208


class SchemaTooLarge(RegistryError):
    code = 42209


class BadRequest(RegistryError):
    """A body that is not JSON, or JSON of the wrong shape (Confluent answers 400/400)."""

    code = 400


class Unauthorized(RegistryError):
    code = 40101

    @property
    def status(self) -> int:
        return 401


class Forbidden(RegistryError):
    code = 40301

    @property
    def status(self) -> int:
        return 403


class SchemaMismatch(InvalidArgument):
    """A value that does not fit its schema; ``field`` is the path to the part that does not
    (``""`` for the value as a whole), e.g. ``address.zip`` or ``items[2]``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def got(v: Any) -> str:
    """A value as a problem names it: short, JSON-like."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, str):
        return repr(v) if len(v) <= 40 else repr(v[:37] + "...")
    if isinstance(v, (bytes, bytearray)):
        return plural(len(v), "byte")
    return repr(v)

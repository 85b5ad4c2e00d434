"""What the security services return (typed: a script's keys are a contract)."""

from __future__ import annotations

from typing import TypedDict


class UserCredentialInfo(TypedDict):
    mechanism: str
    iterations: int


class UserInfo(TypedDict):
    name: str
    credentials: list[UserCredentialInfo]


class AclInfo(TypedDict):
    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

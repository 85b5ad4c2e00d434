"""The listeners of ``rivven serve``: ``NAME://HOST:PORT`` each (Kafka's ``listeners``
syntax), with the security protocol of its name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL,
or ``listener.security.protocol.map``'s entry for another name) and the address clients are
told (``advertised.listeners``; default: where it listens). An empty host listens on every
interface, as Kafka's does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidConfig

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENTRY = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):(\d+)$")


@dataclass
class Listener:
    """One listener: ``name`` (upper case), its security ``protocol``, where it binds
    (``host``, ``port``: 0 for a free one until it is bound), the address clients are told
    (``advertised``; None: the bound one) and its TLS context (``context``, set for SSL and
    SASL_SSL by ``tls.attach``)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised: tuple[str, int] | None = None
    context: Any = None  # ssl.SSLContext

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def url(self, host: str | None = None, port: int | None = None) -> str:
        h = self.host if host is None else host
        return f"{self.name}://{_bracket(h)}:{self.port if port is None else port}"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` comma-separated."""
    out: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or not name.strip() or proto not in PROTOCOLS:
            raise InvalidConfig(f"listener.security.protocol.map entry {item!r}: use "
                                f"NAME:PROTOCOL with a protocol of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def _entries(text: str, setting: str) -> list[tuple[str, str, int]]:
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        m = _ENTRY.match(item)
        if m is None or int(m.group(3)) > 65535:
            raise InvalidConfig(f"{setting} entry {item!r}: use NAME://HOST:PORT, e.g. "
                                "SSL://0.0.0.0:9093 ([v6] for an IPv6 address, an empty HOST "
                                "for every interface)")
        out.append((m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    return out


def parse(text: str, protocols: str) -> list[Listener]:
    """The listeners of ``text`` (``listeners``' syntax; several comma-separated), each
    with its protocol: its name's when the name is a protocol, else the map's."""
    known = protocol_map(protocols)
    out: list[Listener] = []
    for name, host, port in _entries(text, "listeners"):
        proto = known.get(name) or (name if name in PROTOCOLS else None)
        if proto is None:
            raise InvalidConfig(f"listener {name} has no security protocol: name it PLAINTEXT, "
                                "SSL, SASL_PLAINTEXT or SASL_SSL, or map it in "
                                f"listener.security.protocol.map (e.g. {name}:SSL)")
        if any(x.name == name for x in out):
            raise InvalidConfig(f"listener {name} given twice: each listener needs its own "
                                "name")
        if any(x.port == port and port and x.host == host for x in out):
            raise InvalidConfig(f"listeners {name} and another both on {_bracket(host)}:{port}: "
                                "give each its own port")
        out.append(Listener(name, proto, host, port))
    if not out:
        raise InvalidConfig("listeners is empty: give NAME://HOST:PORT, e.g. "
                            "PLAINTEXT://127.0.0.1:9092")
    return out


def advertise(listeners: list[Listener], text: str) -> None:
    """``advertised.listeners``: each named listener's advertised address (port 0: the port
    it is bound to)."""
    by_name = {x.name: x for x in listeners}
    for name, host, port in _entries(text, "advertised.listeners"):
        x = by_name.get(name)
        if x is None:
            raise InvalidConfig(f"advertised.listeners names {name}, which is not a listener "
                                f"({', '.join(by_name)})")
        if not host:
            raise InvalidConfig(f"advertised.listeners {name}: give the host clients connect "
                                "to")
        x.advertised = (host, port)


def resolve(listen: tuple[str, int] | None, advertised: tuple[str, int] | None,
            cli_listeners: list[str], config: Any) -> list[Listener]:
    """The listeners of a ``rivven serve``: ``--listener``s, else the ``listeners``
    setting, else one PLAINTEXT listener on ``--listen``; ``--advertised-listener`` for a
    single one, ``advertised.listeners`` per name."""
    text = ",".join(cli_listeners) if cli_listeners else config.listeners
    if text.strip():
        if listen is not None:
            raise InvalidConfig("--listen and --listener (or the listeners setting) both "
                                "given: use --listener NAME://HOST:PORT only")
        out = parse(text, config.listener_security_protocol_map)
    else:
        host, port = listen or ("127.0.0.1", 9092)
        out = [Listener("PLAINTEXT", "PLAINTEXT", host, port)]
    if config.advertised_listeners.strip():
        advertise(out, config.advertised_listeners)
    if advertised is not None:
        if len(out) != 1:
            raise InvalidConfig("--advertised-listener takes one address, for a single "
                                "listener: with several, set advertised.listeners="
                                "NAME://HOST:PORT,...")
        out[0].advertised = advertised
    return out

"""``rivven serve``'s settings, under Kafka's broker config names where Kafka has one; every
value checked with its bounds (a bad one: InvalidConfig naming the key and the fix)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..errors import InvalidConfig
from ..maintenance import scheduler
from ..maintenance.scheduler import NAMES as MAINTENANCE
from ..maintenance.scheduler import MaintenanceConfig

# name: (default, minimum, what it is)
INTS: dict[str, tuple[int, int, str]] = {
    "socket.request.max.bytes": (104857600, 1024, "largest request frame a client may send"),
    "connections.max.idle.ms": (600000, 1000, "a connection idle this long is closed"),
    "max.connections": (10000, 1, "most client connections at once; past it new ones close"),
    "max.connections.per.ip": (2147483647, 1, "most client connections from one IP address "
                                              "at once; past it new ones from it close"),
    "num.partitions": (1, 1, "partitions of a topic created by a metadata request "
                             "(auto.create.topics.enable) or by CreateTopics with "
                             "num_partitions -1"),
    "group.initial.rebalance.delay.ms": (3000, 0, "how long the first member of an empty "
                                                  "group waits for others to join"),
    "group.min.session.timeout.ms": (6000, 1, "shortest session a consumer may ask for"),
    "group.max.session.timeout.ms": (1800000, 1, "longest session a consumer may ask for"),
    "group.max.size": (1000, 1, "most members of one group"),
    "transaction.max.timeout.ms": (900000, 1, "longest transaction timeout a producer may ask "
                                              "for"),
    "message.max.bytes": (1048588, 64, "largest record batch (a topic's max.message.bytes "
                                       "applies after it)"),
    "fetch.max.bytes": (57671680, 1024, "most bytes of one Fetch response"),
    "num.io.threads": (8, 1, "threads that run requests against the data dir"),
    "queued.max.request.bytes": (-1, -1, "bytes of requests read but not answered, all "
                                         "connections together (-1: 2 x socket.request.max."
                                         "bytes x num.io.threads)"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        10000, 100, "how often transactions past their transaction.timeout.ms are aborted"),
    "offsets.retention.minutes": (10080, 1, "committed offsets of a group with no member "
                                            "kept this long (reported, not yet expired)"),
    "connections.max.reauth.ms": (0, 0, "a SASL session lasts this long; the client "
                                        "authenticates again on its connection before it "
                                        "ends (0: for ever)"),
    "connection.failed.authentication.delay.ms": (
        100, 0, "a failed authentication is answered (and its connection closed) this late"),
    "sasl.server.max.receive.size": (524288, 512, "largest SASL token a client may send "
                                                  "before it is authenticated"),
    "ssl.handshake.timeout.ms": (10000, 100, "a TLS handshake not done in this long is cut "
                                             "off"),
}
BOOLS: dict[str, tuple[bool, str]] = {
    "auto.create.topics.enable": (False, "create a topic a client names but which does not "
                                         "exist (off: UNKNOWN_TOPIC_OR_PARTITION)"),
    "delete.topic.enable": (True, "DeleteTopics deletes (off: TOPIC_DELETION_DISABLED)"),
    "allow.everyone.if.no.acl.found": (False, "a resource no ACL names is open to everyone "
                                              "(off: only to super users)"),
}
# name: (default, what it is); listener.name.<listener>.<name> sets one for one listener
STRS: dict[str, tuple[str, str]] = {
    "listeners": ("", "the listeners, NAME://HOST:PORT comma-separated (rivven serve "
                      "--listener; empty: --listen's PLAINTEXT listener)"),
    "advertised.listeners": ("", "the address clients are told per listener, "
                                 "NAME://HOST:PORT comma-separated"),
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "each listener name's security protocol, NAME:PROTOCOL comma-separated"),
    "ssl.keystore.location": ("", "PEM file of the server's private key and certificate "
                                  "chain"),
    "ssl.keystore.type": ("PEM", "PEM (the only type rivven reads)"),
    "ssl.key.password": ("", "password of an encrypted private key"),
    "ssl.certificate.location": ("", "PEM file of the server's certificate chain (with "
                                     "ssl.key.location, instead of ssl.keystore.location)"),
    "ssl.key.location": ("", "PEM file of the server's private key"),
    "ssl.truststore.location": ("", "PEM file of the CA certificates client certificates are "
                                    "checked against"),
    "ssl.truststore.type": ("PEM", "PEM (the only type rivven reads)"),
    "ssl.client.auth": ("none", "client certificates: none, requested or required"),
    "ssl.principal.mapping.rules": ("DEFAULT", "a client certificate's subject to a user "
                                               "name (Kafka's RULE:pattern/replacement/[LU])"),
    "ssl.enabled.protocols": ("TLSv1.2,TLSv1.3", "TLS versions accepted (TLSv1.2 at least)"),
    "ssl.cipher.suites": ("", "TLS 1.2 cipher suites (OpenSSL names; empty: Python's "
                              "defaults)"),
    "sasl.enabled.mechanisms": ("SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                                "SASL mechanisms offered (PLAIN only over TLS, loopback, or "
                                "with --insecure)"),
    "super.users": ("", "principals allowed everything, semicolon-separated (User:admin)"),
    "authorizer.class.name": ("", "the ACL authorizer: empty (on when the data dir has ACLs), "
                                  "Kafka's StandardAuthorizer or AclAuthorizer class, or acl "
                                  "(on), or none (off)"),
}
# never shown (DescribeConfigs answers null, as Kafka does for a password)
SENSITIVE = frozenset({"ssl.key.password"})


@dataclass(frozen=True)
class ServeConfig:
    socket_request_max_bytes: int = 104857600
    connections_max_idle_ms: int = 600000
    max_connections: int = 10000
    max_connections_per_ip: int = 2147483647
    num_partitions: int = 1
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 1000
    transaction_max_timeout_ms: int = 900000
    message_max_bytes: int = 1048588
    fetch_max_bytes: int = 57671680
    num_io_threads: int = 8
    queued_max_request_bytes: int = -1
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    offsets_retention_minutes: int = 10080
    auto_create_topics_enable: bool = False
    delete_topic_enable: bool = True
    connections_max_reauth_ms: int = 0
    connection_failed_authentication_delay_ms: int = 100
    sasl_server_max_receive_size: int = 524288
    ssl_handshake_timeout_ms: int = 10000
    allow_everyone_if_no_acl_found: bool = False
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = STRS["listener.security.protocol.map"][0]
    ssl_keystore_location: str = ""
    ssl_keystore_type: str = "PEM"
    ssl_key_password: str = field(default="", repr=False)
    ssl_certificate_location: str = ""
    ssl_key_location: str = ""
    ssl_truststore_location: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_client_auth: str = "none"
    ssl_principal_mapping_rules: str = "DEFAULT"
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    ssl_cipher_suites: str = ""
    sasl_enabled_mechanisms: str = STRS["sasl.enabled.mechanisms"][0]
    super_users: str = ""
    authorizer_class_name: str = ""
    # listener.name.<listener lower-case>.<setting>: that listener's own value
    per_listener: tuple[tuple[str, str, str], ...] = ()
    # the background maintenance (log.retention.check.interval.ms, log.cleaner.*, ...)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)

    @classmethod
    def parse(cls, values: dict[str, str] | None) -> ServeConfig:
        """From ``{kafka name: text}``; unknown names and bad values refused."""
        out: dict[str, object] = {}
        maintenance: dict[str, str] = {}
        per_listener: list[tuple[str, str, str]] = []
        for k, text in (values or {}).items():
            attr = k.replace(".", "_")
            if k in MAINTENANCE:
                maintenance[k] = text
            elif k in INTS or k in BOOLS:
                out[attr] = scheduler.setting_value(k, text, INTS, BOOLS)
            elif k in STRS:
                out[attr] = str(text).strip()
            elif k.startswith("listener.name.") and k.count(".") >= 3:
                name, _, setting = k.removeprefix("listener.name.").partition(".")
                if setting not in STRS and setting not in INTS:
                    raise InvalidConfig(f"unknown listener setting {setting!r} in {k}; a "
                                        "listener takes the ssl.* and sasl.* settings")
                per_listener.append((name.lower(), setting, str(text).strip()))
            else:
                raise InvalidConfig(f"unknown serve setting {k!r}; valid: "
                                    f"{', '.join(sorted([*INTS, *BOOLS, *STRS, *MAINTENANCE]))}"
                                    ", listener.name.<listener>.<setting>")
        out["per_listener"] = tuple(per_listener)
        cfg = cls(**out, maintenance=MaintenanceConfig.parse(maintenance))  # type: ignore[arg-type]
        cfg.authorizer_on()
        if cfg.ssl_client_auth not in ("none", "requested", "required"):
            raise InvalidConfig(f"ssl.client.auth={cfg.ssl_client_auth!r}: give none, "
                                "requested or required")
        if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
            raise InvalidConfig("group.min.session.timeout.ms is above "
                                "group.max.session.timeout.ms: lower the first or raise the "
                                "second")
        return cfg

    def request_budget(self) -> int:
        if self.queued_max_request_bytes > 0:
            return self.queued_max_request_bytes
        return 2 * self.socket_request_max_bytes * self.num_io_threads

    def as_kafka(self) -> dict[str, str]:
        """Every setting under its Kafka name (DescribeConfigs of the broker)."""
        out: dict[str, str] = {}
        for f in fields(self):
            if f.name in ("maintenance", "per_listener"):
                continue
            v = getattr(self, f.name)
            out[f.name.replace("_", ".")] = str(v).lower() if isinstance(v, bool) else str(v)
        for name, setting, text in self.per_listener:
            out[f"listener.name.{name}.{setting}"] = text
        return {**out, **self.maintenance.as_kafka()}

    def listener_value(self, listener: str, name: str) -> str:
        """Setting ``name`` (a Kafka name) for ``listener``: its listener.name.<listener>.
        value when there is one, else the server's."""
        for lname, setting, v in self.per_listener:
            if lname == listener.lower() and setting == name:
                return v
        return str(getattr(self, name.replace(".", "_")))

    def authorizer_on(self) -> bool | None:
        """True: ACLs enforced; False: off; None: on when the data dir has ACLs."""
        v = self.authorizer_class_name.strip()
        if not v:
            return None
        if v.lower() == "none":
            return False
        if v.lower() in ("acl", "rivven") or v.endswith(("StandardAuthorizer", "AclAuthorizer")):
            return True
        raise InvalidConfig(f"authorizer.class.name={v!r} is not an authorizer rivven has: "
                            "give org.apache.kafka.metadata.authorizer.StandardAuthorizer "
                            "(or acl), none, or leave it empty")

    def super_user_set(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.super_users.split(";") if p.strip())


_LONGS = ("queued.max.request.bytes", "log.cleaner.spark.threshold.bytes")  # (past 2^31)
_LISTS = ("listeners", "advertised.listeners", "ssl.enabled.protocols", "ssl.cipher.suites",
          "sasl.enabled.mechanisms", "ssl.principal.mapping.rules")


def described() -> dict[str, tuple[str, str]]:
    """Every setting's meaning and its type as Kafka's ConfigDef names it (boolean, string,
    int or long): DescribeConfigs of the broker."""
    out: dict[str, tuple[str, str]] = {}
    for ints, bools, strs in ((INTS, BOOLS, STRS), (scheduler.INTS, scheduler.BOOLS,
                                                  scheduler.STRS)):
        out.update({k: (doc, "long" if k.endswith(".ms") or k in _LONGS else "int")
                    for k, (_, _, doc) in ints.items()})
        out.update({k: (doc, "boolean") for k, (_, doc) in bools.items()})
        out.update({k: (doc, "password" if k in SENSITIVE else "list" if k in _LISTS else
                        "string") for k, (_, doc) in strs.items()})
    return out

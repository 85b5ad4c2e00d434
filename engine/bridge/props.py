"""A Kafka client properties file (``--config FILE``, what ``kafka-console-producer
--producer.config`` reads) as librdkafka settings: Java's properties syntax, and the few Java
spellings librdkafka names differently (``sasl.jaas.config``'s user and password, a PEM
truststore). Settings librdkafka does not know are left for it to name in its own error."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import InvalidArgument

# Java-only: how the Java client turns objects into bytes; the copy moves bytes as they are
_JAVA_ONLY = (".serializer", ".deserializer")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = {"PlainLoginModule", "ScramLoginModule"}
MAX_FILE = 1 << 20  # (a properties file is a few lines: a bigger one is the wrong file)


def parse_properties(lines: Iterable[str], where: str) -> dict[str, str]:
    """``key=value`` (or ``key: value``, or ``key value``) lines, ``#``/``!`` comments, a
    trailing backslash continuing a line: Java's ``Properties.load`` for what client files
    hold (no unicode escapes)."""
    out: dict[str, str] = {}
    pending = ""
    for n, raw in enumerate(lines, 1):
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        m = re.match(r"((?:[^\s=:\\]|\\.)+)\s*[=:\s]\s*(.*)$", line)
        if m is None:
            if re.fullmatch(r"(?:[^\s=:\\]|\\.)+", line):  # (a key alone: an empty value)
                out[line] = ""
                continue
            raise InvalidArgument(f"{where} line {n}: {raw.strip()!r} is not key=value")
        out[m.group(1).replace("\\", "")] = m.group(2)
    return out


def to_librdkafka(props: dict[str, str], where: str) -> dict[str, str]:
    """Java client property names as librdkafka's."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key.endswith(_JAVA_ONLY):
            continue
        if key == "sasl.jaas.config":
            out.update(_jaas(value, where))
        elif key == "ssl.truststore.location":
            kind = props.get("ssl.truststore.type", "JKS").upper()
            if kind != "PEM":
                raise InvalidArgument(
                    f"{where}: ssl.truststore.type {kind}: librdkafka reads PEM certificates; "
                    "convert the truststore (keytool -exportcert -rfc) and give "
                    "ssl.ca.location=FILE.pem")
            out["ssl.ca.location"] = value
        elif key == "ssl.truststore.type":
            continue
        else:
            out[key] = value
    return out


def _jaas(value: str, where: str) -> dict[str, str]:
    module = value.split(None, 1)[0] if value.strip() else ""
    if module.rsplit(".", 1)[-1] not in _JAAS_MODULES:
        raise InvalidArgument(
            f"{where}: sasl.jaas.config with {module or 'no login module'}: only PLAIN and "
            "SCRAM logins (PlainLoginModule, ScramLoginModule) are read; give sasl.username "
            "and sasl.password instead")
    options = {k: v.replace('\\"', '"').replace("\\\\", "\\")
               for k, v in _JAAS_OPTION.findall(value)}
    out = {}
    if "username" in options:
        out["sasl.username"] = options["username"]
    if "password" in options:
        out["sasl.password"] = options["password"]
    return out


def read_properties(path: str) -> dict[str, str]:
    """The librdkafka settings of the properties file at ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_FILE + 1)
    except OSError as e:
        raise InvalidArgument(f"cannot read the client properties {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"{path} is not a text file of client properties") from None
    if len(text) > MAX_FILE:
        raise InvalidArgument(f"{path} is larger than a client properties file can be (1 MiB)")
    return to_librdkafka(parse_properties(text.splitlines(), path), path)

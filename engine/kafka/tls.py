"""TLS of the SSL and SASL_SSL listeners: the server's context from Kafka's ``ssl.*``
settings (PEM only; TLS 1.2 at least, 1.3 when the client has it), and the principal of a
client certificate: its subject as Java's ``X500Principal.getName()`` writes it (RFC 2253:
``CN=alice,OU=eng,O=acme``) through Kafka's ``ssl.principal.mapping.rules`` (its
SslPrincipalMapper, rule for rule), as ``User:<name>``."""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import InvalidConfig

VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


# ------------------------------------------------------------------ the server's context
class AlertingSSLObject(ssl.SSLObject):
    """asyncio drops what OpenSSL wrote when a handshake fails: the client would see a
    closed connection instead of the TLS alert that says why (an unknown CA, a certificate
    required), and Kafka's clients would retry for ever rather than fail. So a failure is
    first reported as "wants more input" (asyncio then sends the alert), kept in
    ``failed``, and raised the next time (the client's next bytes; a client that closes
    ends the handshake with a reset)."""

    failed: ssl.SSLError | None = None
    # (the listener's: told of a failure, it closes the connections whose handshake failed
    # a moment later, if their clients did not close first)
    on_failure: ClassVar[Callable[[ssl.SSLObject, ssl.SSLError], None] | None] = None

    def do_handshake(self) -> None:
        if self.failed is not None:
            raise self.failed
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as e:
            self.failed = e
            hook = type(self).on_failure
            if hook is not None:
                hook(self, e)
            raise ssl.SSLWantReadError("the alert first") from e


def server_context(config: Any, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener`` from its settings (``listener.name.<l>.ssl.*`` or the
    server's); InvalidConfig naming the setting (and the file) that is wrong."""
    def get(name: str) -> str:
        return str(config.listener_value(listener, name)).strip()

    where = f"listener {listener}"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = type("AlertingSSLObject", (AlertingSSLObject,), {})  # (its hook)
    names = [p.strip() for p in get("ssl.enabled.protocols").split(",") if p.strip()]
    bad = [p for p in names if p not in VERSIONS]
    if bad or not names:
        raise InvalidConfig(f"ssl.enabled.protocols={get('ssl.enabled.protocols')!r} ({where}): "
                            "give TLSv1.2 and/or TLSv1.3 (older versions are not accepted)")
    versions = sorted(VERSIONS[p] for p in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    for setting in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(setting).upper() != "PEM":
            raise InvalidConfig(f"{setting}={get(setting)!r} ({where}): rivven reads PEM files "
                                "only; convert the store (openssl pkcs12 -nodes / keytool "
                                "-exportcert -rfc) and set PEM")
    password = get("ssl.key.password")
    keystore, cert, key = (get("ssl.keystore.location"), get("ssl.certificate.location"),
                           get("ssl.key.location"))
    if keystore:
        _load_chain(ctx, "ssl.keystore.location", keystore, None, password, where)
    elif cert and key:
        _load_chain(ctx, "ssl.certificate.location", cert, key, password, where)
    else:
        raise InvalidConfig(f"{where} uses TLS but has no certificate: set "
                            "ssl.keystore.location (a PEM with the private key and the "
                            "certificate chain) or ssl.certificate.location and "
                            "ssl.key.location")
    auth = get("ssl.client.auth").lower()
    if auth not in CLIENT_AUTH:
        raise InvalidConfig(f"ssl.client.auth={auth!r} ({where}): give none, requested or "
                            "required")
    trust = get("ssl.truststore.location")
    if trust:
        _readable("ssl.truststore.location", trust, where)
        try:
            ctx.load_verify_locations(cafile=trust)
        except (ssl.SSLError, ValueError) as e:
            raise InvalidConfig(f"ssl.truststore.location={trust} ({where}): no PEM CA "
                                f"certificate in it ({_reason(e)})") from None
    elif auth != "none":
        raise InvalidConfig(f"ssl.client.auth={auth} ({where}) needs ssl.truststore.location: "
                            "the CA certificates client certificates are checked against")
    ctx.verify_mode = CLIENT_AUTH[auth]
    ciphers = [c.strip() for c in get("ssl.cipher.suites").split(",") if c.strip()]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise InvalidConfig(f"ssl.cipher.suites={','.join(ciphers)!r} ({where}): no cipher "
                                "suite OpenSSL knows (OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-"
                                "SHA256; TLS 1.3's are always on)") from None
    PrincipalMapper(get("ssl.principal.mapping.rules"), where)  # (checked now, not per client)
    timeout = get("ssl.handshake.timeout.ms")
    if not timeout.isdigit() or int(timeout) < 100:
        raise InvalidConfig(f"ssl.handshake.timeout.ms={timeout!r} ({where}): give a whole "
                            "number of milliseconds, 100 or more")
    return ctx


def _readable(setting: str, path: str, where: str) -> None:
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise InvalidConfig(f"{setting}={path} ({where}): cannot read it: "
                            f"{e.strerror or e}") from None


def _reason(e: Exception) -> str:
    return str(getattr(e, "reason", None) or e).lower().replace("_", " ")


def _load_chain(ctx: ssl.SSLContext, setting: str, cert: str, key: str | None, password: str,
                where: str) -> None:
    _readable(setting, cert, where)
    if key is not None:
        _readable("ssl.key.location", key, where)
    try:
        # (a callable, even for no password: OpenSSL would prompt on the terminal)
        ctx.load_cert_chain(cert, key, password=lambda: password.encode())
    except (ssl.SSLError, ValueError) as e:
        what = _reason(e)
        try:
            with open(key or cert, "rb") as f:
                encrypted = b"ENCRYPTED" in f.read(1 << 20)
        except OSError:
            encrypted = False
        hint = ("the private key does not match the certificate" if "mismatch" in what else
                "the private key is encrypted: set ssl.key.password" if encrypted and
                not password else "ssl.key.password is wrong or missing for the encrypted key"
                if encrypted or "decrypt" in what or "password" in what else
                "not a PEM certificate chain and private key")
        files = cert if key is None else f"{cert} with ssl.key.location={key}"
        raise InvalidConfig(f"{setting}={files} ({where}): {hint} ({what})") from None


def peer_principal(ssl_object: Any, mapper: PrincipalMapper) -> str | None:
    """``User:<name>`` of the client's certificate (None: it sent none); ValueError when no
    mapping rule applies (Kafka then fails the authentication)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return None
    try:
        dn = subject_dn(der)
    except (ValueError, IndexError) as e:  # (OpenSSL checked it: not expected)
        raise ValueError(f"its subject cannot be read: {e}") from None
    return "User:" + mapper.name(dn)


# ------------------------------------------------------------------ the subject's name
# RFC 2253's keywords (the ones Java's X500Principal.getName() writes by name)
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
             "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
             "0.9.2342.19200300.100.1.1": "UID"}
# ASN.1 string types Java writes as text (others: #hex of the DER value)
_TEXT = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1",
         0x1E: "utf-16-be"}
_ESCAPED = ',=+<>#;"\\'


def _tlv(data: bytes, i: int) -> tuple[int, int, int, int]:
    """(tag, start of the content, end of the content, end of the whole) at ``i``."""
    tag = data[i]
    n = data[i + 1]
    j = i + 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(data[j:j + k], "big")
        j += k
    if j + n > len(data):
        raise ValueError("a truncated DER value")
    return tag, j, j + n, j + n


def _oid(b: bytes) -> str:
    arcs: list[int] = []
    v = 0
    for x in b:
        v = (v << 7) | (x & 0x7F)
        if not x & 0x80:
            arcs.append(v)
            v = 0
    if not arcs:
        return ""
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(map(str, head + arcs[1:]))


def _value(v: str) -> str:
    out = []
    for c in v:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\x00":
            out.append("\\00")
        else:
            out.append(c)
    s = "".join(out)
    lead = len(s) - len(s.lstrip(" \r"))
    trail = len(s) - len(s.rstrip(" \r"))
    if lead == len(s):
        return "".join("\\" + c for c in s)
    return ("".join("\\" + c for c in s[:lead]) + s[lead:len(s) - trail]
            + "".join("\\" + c for c in s[len(s) - trail:]))


def dn_of_name(name_der: bytes) -> str:
    """An X.500 Name (DER) as Java's ``X500Principal.getName()`` writes it: RFC 2253, the
    last RDN first, RFC 2253's keywords by name, other types as OID=#hex."""
    tag, i, end, _ = _tlv(name_der, 0)
    if tag != 0x30:
        raise ValueError("not an X.500 name")
    rdns = []
    while i < end:
        _, j, set_end, i = _tlv(name_der, i)  # a SET of attributes
        avas = []
        while j < set_end:
            _, k, _, j = _tlv(name_der, j)  # SEQUENCE {type, value}
            _, o, o_end, k = _tlv(name_der, k)
            oid = _oid(name_der[o:o_end])
            vtag, v, v_end, v_next = _tlv(name_der, k)
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and vtag in _TEXT:
                avas.append(f"{keyword}={_value(name_der[v:v_end].decode(_TEXT[vtag], 'replace'))}")
            else:
                avas.append(f"{keyword or oid}=#{name_der[k:v_next].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def subject_dn(cert_der: bytes) -> str:
    """The subject of a certificate (DER) as Java's ``X500Principal.getName()``."""
    from cryptography import x509

    return dn_of_name(x509.load_der_x509_certificate(cert_der).subject.public_bytes())


# ------------------------------------------------------------------ Kafka's mapping rules
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


class Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None,
                 lower: bool = False, upper: bool = False) -> None:
        self.default = pattern is None
        self.source = pattern
        self.pattern = re.compile(pattern, re.ASCII) if pattern is not None else None
        self.replacement = replacement
        self.lower, self.upper = lower, upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        n = self.pattern.groups
        repl = _escape_literal_back_references(self.replacement or "", n)
        result = self.pattern.sub(lambda m: _java_replacement(m, repl, n), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:  # (Kafka's toString)
        if self.default:
            return "DEFAULT"
        out = "RULE:" + (self.source or "")
        if self.replacement is not None:
            out += "/" + self.replacement
        return out + ("/L" if self.lower else "/U" if self.upper else "")


def _escape_literal_back_references(value: str, groups: int) -> str:
    """Kafka's (NiFi's) escapeLiteralBackReferences: ``$n`` past the groups is literal."""
    if groups == 0:
        return value
    # (as Kafka's: the matches are those of the original text, their positions applied to
    # the text as escaped so far)
    for m in list(_BACKREF.finditer(value)):
        num = m.group(1)
        if num.startswith("0"):
            continue
        index = int(num)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _java_replacement(m: re.Match[str], repl: str, groups: int) -> str:
    """Java's Matcher.appendReplacement: ``\\x`` is x, ``$n`` group n (digits taken while
    they name a group), ``${name}`` a named group."""
    out = []
    i = 0
    while i < len(repl):
        c = repl[i]
        if c == "\\":
            i += 1
            if i >= len(repl):
                raise ValueError("character to be escaped is missing")
            out.append(repl[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= len(repl):
                raise ValueError("Illegal group reference: group index is missing")
            if repl[i] == "{":
                close = repl.find("}", i)
                if close < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                out.append(m.group(repl[i + 1:close]) or "")
                i = close + 1
                continue
            if not repl[i].isdigit():
                raise ValueError("Illegal group reference")
            ref = int(repl[i])
            i += 1
            if ref > groups:
                raise ValueError(f"No group {ref}")
            while i < len(repl) and repl[i].isdigit():
                new = ref * 10 + int(repl[i])
                if new > groups:
                    break
                ref = new
                i += 1
            out.append(m.group(ref) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: ``DEFAULT`` (the name as it is) and
    ``RULE:pattern/replacement/`` with ``L`` or ``U`` (lower or upper case) rules,
    comma-separated; the first whose pattern matches the whole name gives it."""

    def __init__(self, rules: str, where: str = "") -> None:
        self.rules: list[Rule] = []
        for m in _SPLITTER.finditer(rules.strip()):
            text = m.group(1)
            p = _PARSER.match(text)
            if p is None or p.end() != len(text):
                left = text[p.end():] if p is not None else text
                raise InvalidConfig(f"ssl.principal.mapping.rules{f' ({where})' if where else ''}"
                                    f": invalid rule {text!r} (unmatched {left!r}); use DEFAULT "
                                    "or RULE:pattern/replacement/[L|U], comma-separated")
            if p.group(1) is not None:
                self.rules.append(Rule())
            elif p.group(2) is not None:
                try:
                    self.rules.append(Rule(p.group(2), p.group(4), p.group(6) == "L",
                                           p.group(6) == "U"))
                except re.error as e:
                    raise InvalidConfig(f"ssl.principal.mapping.rules: the pattern of {text!r} "
                                        f"is not a regular expression: {e}") from None

    def name(self, dn: str) -> str:
        for r in self.rules:
            got = r.apply(dn)
            if got is not None:
                return got
        raise ValueError(f"no ssl.principal.mapping.rules rule applies to {dn!r}")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"

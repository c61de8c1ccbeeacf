"""JAAS login module configs as Kafka takes them in ``sasl.jaas.config`` values.

One entry: ``<LoginModule class> <flag> key="value" key2=value2 ... ;`` e.g.::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice";

The broker reads its own credentials (``username``/``password``, used when it connects
to other brokers) and, for PLAIN, its users (``user_<name>="<password>"``) from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:([A-Za-z0-9_.\-$]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))|(;))')


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_")}


def parse_jaas_config(text: str) -> JaasConfig:
    """One login module entry; ValueError says what is wrong (Kafka's JaasConfig)."""
    head = text.strip().split(None, 2)
    if len(head) < 2:
        raise ValueError("expected '<LoginModule> <flag> key=\"value\" ... ;'")
    module, flag = head[0], head[1].rstrip(";").lower()
    if flag not in FLAGS:
        raise ValueError(f"login module control flag {head[1]!r} is not one of {', '.join(FLAGS)}")
    rest = head[2] if len(head) > 2 else (";" if head[1].endswith(";") else "")
    options: dict[str, str] = {}
    pos, ended = 0, False
    while pos < len(rest):
        if not rest[pos:].strip():
            break
        if ended:
            raise ValueError("only one login module entry is allowed")
        match = _TOKEN.match(rest, pos)
        if match is None:
            raise ValueError(f"cannot parse {rest[pos:].strip()[:40]!r}")
        key, quoted, bare, semicolon = match.groups()
        if semicolon:
            ended = True
        else:
            value = quoted if quoted is not None else bare
            options[key] = re.sub(r"\\(.)", r"\1", value) if quoted is not None else value
        pos = match.end()
    if not ended:
        raise ValueError("the login module entry must end with ';'")
    return JaasConfig(module, flag, options)


def _split_outside_quotes(text: str, stops: str) -> list[tuple[str, str]]:
    """(piece, the stop character that ended it) for each piece of ``text``; quoted
    strings (with backslash escapes) are kept whole."""
    pieces, current, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch in stops and not quoted:
            pieces.append(("".join(current), ch))
            current = []
            continue
        current.append(ch)
    if quoted:
        raise ValueError("a quoted value is not closed")
    pieces.append(("".join(current), ""))
    return pieces


def parse_jaas_file(text: str) -> dict[str, list[JaasConfig]]:
    """A JAAS login configuration file (``java.security.auth.login.config``): named
    sections of login module entries, as ZooKeeper's and Kafka's files have them::

        Client {
            org.apache.zookeeper.server.auth.DigestLoginModule required
            username="kafka" password="kafka-secret";
        };

    ``//`` and ``#`` comment lines are skipped. ValueError says what is wrong."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith(("//", "#"))]
    sections: dict[str, list[JaasConfig]] = {}
    rest = "\n".join(lines)
    while rest.strip():
        head, _, body = rest.partition("{")
        name = head.strip()
        if not _ or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
            raise ValueError(f"expected '<Section> {{ ... }};', got {rest.strip()[:40]!r}")
        parts = _split_outside_quotes(body, "}")
        if parts[0][1] != "}":
            raise ValueError(f"section {name} is not closed with '}};'")
        entries = [e for e, _stop in _split_outside_quotes(parts[0][0], ";") if e.strip()]
        sections[name] = [parse_jaas_config(entry + ";") for entry in entries]
        rest = "".join(piece + stop for piece, stop in parts[1:])
        rest = rest.lstrip()
        if not rest.startswith(";"):
            raise ValueError(f"section {name} must end with '}};'")
        rest = rest[1:]
    return sections


def jaas_section(name: str, login_module: str, options: dict[str, str]) -> str:
    """One section of a JAAS file, values quoted (``parse_jaas_file`` reads it back)."""
    quoted = " ".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in options.items()
    )
    return f"{name} {{\n    {login_module} required\n    {quoted};\n}};\n"

"""``ssl.principal.mapping.rules``: a TLS client certificate's DN -> the principal name,
as Kafka's SslPrincipalMapper.

Rules are tried in order, separated by commas: ``DEFAULT`` (the DN as it is, e.g.
``CN=alice,OU=eng,O=Quill``) or ``RULE:pattern/replacement/[L|U]`` where the Java
regex ``pattern`` must match the whole DN and ``$1``.. in ``replacement`` refer to its
groups; ``L``/``U`` lower- or upper-case the result. A DN no rule matches fails the
connection's authentication, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kafka's RULE_PARSER, one rule at a time (a pattern may hold escaped slashes and commas)
_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)(.*?)|(.*?))\s*(?:,\s*|$)"
)


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        out = match.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _python_replacement(java: str) -> str:
    """Java's ``$1`` group references -> Python's ``\\g<1>``; backslashes kept literal."""
    out, i = [], 0
    while i < len(java):
        ch = java[i]
        if ch == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if ch == "$" and i + 1 < len(java) and java[i + 1].isdigit():
            j = i + 1
            while j < len(java) and java[j].isdigit():
                j += 1
            out.append(f"\\g<{java[i + 1 : j]}>")
            i = j
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = self._parse(rules)

    @staticmethod
    def _parse(text: str) -> list[_Rule]:
        rules: list[_Rule] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"cannot parse ssl.principal.mapping.rules at {text[pos:]!r}")
            default, pattern, replacement, case, trailing, bad = match.groups()
            if bad or trailing:
                raise ValueError(f"invalid rule in ssl.principal.mapping.rules: {match.group(0)!r}")
            if default:
                rules.append(_Rule(None))
            else:
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None
                rules.append(_Rule(compiled, _python_replacement(replacement), case))
            pos = match.end()
        return rules or [_Rule(None)]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")

"""Shapes of a parsed Avro schema (fastavro.parse_schema's output, references as
full-name strings, with the named_schemas dict it filled) that a decoder must treat
with care: named types that contain themselves (a linked list, a tree)."""

from __future__ import annotations

NAMED = ("record", "error", "enum", "fixed")


def _refs(node, named: dict, out: set) -> None:
    """The named types `node` refers to, by name or inline (not looking inside them)."""
    if isinstance(node, str):
        if node in named:
            out.add(node)
    elif isinstance(node, list):
        for branch in node:
            _refs(branch, named, out)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in NAMED:
            out.add(node.get("name"))  # an inline definition: an edge, its body is its own
        elif kind == "array":
            _refs(node.get("items"), named, out)
        elif kind == "map":
            _refs(node.get("values"), named, out)
        elif not isinstance(kind, str):
            _refs(kind, named, out)


def recursive_names(named: dict) -> list[str]:
    """Named types that contain themselves, directly or through other named types
    (`named`: the named_schemas dict that fastavro.parse_schema filled)."""
    edges = {}
    for name, body in named.items():
        edges[name] = out = set()
        if body.get("type") in ("record", "error"):
            for field in body.get("fields", []):
                _refs(field.get("type"), named, out)
    found = []
    for start in named:
        seen, todo = set(), list(edges[start])
        while todo:
            name = todo.pop()
            if name == start:
                found.append(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(edges.get(name, ()))
    return found

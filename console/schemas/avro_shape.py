"""Shapes of a parsed Avro schema (fastavro.parse_schema's output, references as
full-name strings, with the named_schemas dict it filled) that a decoder must treat
with care: named types that contain themselves (a linked list, a tree) and arrays whose
items can take no bytes at all."""

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


def _empty(node, named: dict, visiting: frozenset = frozenset()) -> bool:
    """Whether a value of `node` can take zero bytes in Avro's binary encoding. A union
    never does (its branch index takes a byte), nor a map entry (its key's length does)."""
    if isinstance(node, str):
        if node == "null":
            return True
        if node in named and node not in visiting:
            return _empty(named[node], named, visiting | {node})
        return False
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error"):
            visiting = visiting | {node.get("name")}
            return all(_empty(f.get("type"), named, visiting) for f in node.get("fields", []))
        if kind == "fixed":
            return node.get("size") == 0
        if kind == "null":
            return True
        if not isinstance(kind, str):
            return _empty(kind, named, visiting)
    return False


def _arrays(node, named: dict, seen: set):
    """Every array schema inside `node` (each named type's body walked once)."""
    if isinstance(node, str):
        if node in named and node not in seen:
            seen.add(node)
            yield from _arrays(named[node], named, seen)
    elif isinstance(node, list):
        for branch in node:
            yield from _arrays(branch, named, seen)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error"):
            seen.add(node.get("name"))
            for field in node.get("fields", []):
                yield from _arrays(field.get("type"), named, seen)
        elif kind == "array":
            yield node
            yield from _arrays(node.get("items"), named, seen)
        elif kind == "map":
            yield from _arrays(node.get("values"), named, seen)
        elif not isinstance(kind, str):
            yield from _arrays(kind, named, seen)


def empty_item_arrays(parsed, named: dict) -> list:
    """The item schemas of arrays whose items can take zero bytes: a 5-byte payload could
    claim billions of them (each one a Python object), so such a schema is refused."""
    return [a.get("items") for a in _arrays(parsed, named, set()) if _empty(a.get("items"), named)]

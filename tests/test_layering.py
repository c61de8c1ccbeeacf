"""No two of our top-level packages import each other, directly or round a longer
circle: every import statement of every module (at the top, inside functions, at the
bottom) is read with ast, and the graph of packages must have no cycle.

The layers, top to bottom: console (the Django project: pages, API, monitor) ->
operations, alerts (Django apps: records, services, Celery tasks, job kinds) -> workers
(the Celery app) and livefeed (channel groups, the monitor's Redis history) ->
cluster_client (the operator-side cluster client; pipeline uses it too) -> broker;
quill_stack (the local stack) -> broker."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "broker",
    "console",
    "workers",
    "quill_stack",
    "pipeline",
    "cluster_client",
    "operations",
    "alerts",
    "livefeed",
)


def imported_modules(path: Path) -> set[str]:
    """The absolute module names one file imports (relative imports stay in its package)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def package_graph(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """{package: {imported package: [the files that import it]}}."""
    graph: dict[str, dict[str, list[str]]] = {p: {} for p in PACKAGES}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for name in imported_modules(path):
                top = name.split(".", 1)[0]
                if top in PACKAGES and top != package:
                    graph[package].setdefault(top, []).append(str(path.relative_to(root)))
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_every_package_is_read():
    graph = package_graph()
    assert all((ROOT / p / "__init__.py").is_file() for p in PACKAGES)
    # the walk sees imports: the console uses the cluster client, everyone the broker's codecs
    assert "cluster_client" in graph["console"]
    assert "broker" in graph["cluster_client"]


def test_no_two_packages_import_each_other():
    graph = package_graph()
    cycle = find_cycle(graph)
    if cycle:
        hops = [
            f"{a} -> {b} ({', '.join(graph[a][b][:3])})"
            for a, b in zip(cycle, cycle[1:], strict=False)
        ]
        raise AssertionError("packages import each other in a circle:\n" + "\n".join(hops))


def test_the_cycle_finder_finds_one():
    graph = {"a": {"b": ["a/x.py"]}, "b": {"c": ["b/y.py"]}, "c": {"a": ["c/z.py"]}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {}}) is None

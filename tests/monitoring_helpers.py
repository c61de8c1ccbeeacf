"""The metric names docs/monitoring's Grafana dashboard and Prometheus rules query."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

MONITORING = Path(__file__).resolve().parent.parent / "docs" / "monitoring"
PROMQL_WORDS = {
    "sum", "rate", "irate", "increase", "max", "min", "avg", "count", "by", "without",
    "histogram_quantile", "topk", "bottomk", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "abs", "delta", "deriv", "offset", "bool", "absent", "vector",
    "label_replace", "clamp_min", "clamp_max", "max_over_time", "min_over_time",
    "avg_over_time", "time", "scalar", "changes", "resets", "round", "sort", "sort_desc",
}  # fmt: skip


def expressions() -> list[str]:
    exprs = []
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        exprs += [t["expr"] for t in panel.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    rules = yaml.safe_load((MONITORING / "prometheus-rules.yml").read_text())
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    return exprs


def names_in(expr: str) -> set[str]:
    """Metric names of a PromQL expression (identifiers not inside {...} or by (...),
    not functions, keywords or $variables)."""
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping labels
    expr = re.sub(r'"[^"]*"', "", expr)  # strings
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"label_values\(([^,)]*),[^)]*\)", r"\1", expr)
    words = set(re.findall(r"(?<![\w$.])[a-zA-Z_:][\w:]*", expr))
    return {w for w in words if w not in PROMQL_WORDS and not w.startswith("$")}


def dashboard_and_rule_names() -> set[str]:
    return set().union(*(names_in(e) for e in expressions()))

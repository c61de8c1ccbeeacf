"""A proposal as operators read it (the dry run): moves, bytes to move, per-broker
replicas, leaders and bytes before and after, and Kafka's reassignment JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

Part = tuple[str, int]


@dataclass
class Proposal:
    moves: list[dict] = field(default_factory=list)
    bytes_to_move: int = 0
    brokers: dict[int, dict] = field(default_factory=dict)

    def plan(self) -> dict:
        """Kafka's reassignment JSON (kafka-reassign-partitions --execute) for the moves."""
        return reassignment_json({(m["topic"], m["partition"]): m["replicas"] for m in self.moves})

    def as_dict(self) -> dict:
        return {
            "moves": self.moves,
            "partitions_to_move": len(self.moves),
            "bytes_to_move": self.bytes_to_move,
            "brokers": [{"id": b, **row} for b, row in sorted(self.brokers.items())],
            "balance": balance(self.brokers),
            "plan": self.plan(),
        }


def reassignment_json(target: dict[Part, list[int]]) -> dict:
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
            for (t, p), r in sorted(target.items())
        ],
    }


def _per_broker(assignment: dict[Part, list[int]], sizes: dict[Part, int], brokers) -> dict:
    rows = {b: {"replicas": 0, "leaders": 0, "bytes": 0} for b in brokers}
    for part, replicas in assignment.items():
        for i, b in enumerate(replicas):
            row = rows.setdefault(b, {"replicas": 0, "leaders": 0, "bytes": 0})
            row["replicas"] += 1
            row["bytes"] += sizes.get(part, 0)
            if i == 0:
                row["leaders"] += 1
    return rows


def describe(
    current: dict[Part, list[int]],
    target: dict[Part, list[int]],
    sizes: dict[Part, int] | None = None,
    brokers=(),
) -> Proposal:
    """The dry-run view of going from `current` to `target`. A reorder of the same
    replicas is a move of no bytes (it changes the preferred leader)."""
    sizes = sizes or {}
    moves, to_move = [], 0
    for part in sorted(target):
        old, new = current.get(part, []), target[part]
        if old == new:
            continue
        adding = [b for b in new if b not in old]
        size = sizes.get(part, 0)
        moves.append(
            {
                "topic": part[0],
                "partition": part[1],
                "from": old,
                "replicas": new,
                "adding": adding,
                "removing": [b for b in old if b not in new],
                "bytes": size * len(adding),
            }
        )
        to_move += size * len(adding)
    everyone = set(brokers) | {b for r in current.values() for b in r}
    before = _per_broker(current, sizes, everyone)
    after = _per_broker(target, sizes, everyone)
    rows = {
        b: {
            "before": before.get(b, {"replicas": 0, "leaders": 0, "bytes": 0}),
            "after": after.get(b, {"replicas": 0, "leaders": 0, "bytes": 0}),
        }
        for b in sorted(everyone | set(after))
    }
    return Proposal(moves=moves, bytes_to_move=to_move, brokers=rows)


def balance(rows: dict[int, dict]) -> dict:
    """Max and min replicas, leaders and bytes per broker, before and after, over the
    brokers that hold something afterwards (a removed broker ends empty on purpose)."""
    holding = [r for r in rows.values() if r["after"]["replicas"] > 0] or list(rows.values())
    out = {}
    for when in ("before", "after"):
        for what in ("replicas", "leaders", "bytes"):
            values = [r[when][what] for r in holding]
            out[f"{what}_{when}"] = {"max": max(values, default=0), "min": min(values, default=0)}
    return out

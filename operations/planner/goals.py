"""The proposer's goals, applied in priority order to a copy of the current assignment.

Every step changes as little as it can: a partition that already meets every goal keeps
its replicas and their order. Candidate searches are bounded (SCAN replicas of a broker
per move), so 10,000 partitions x RF 3 take well under a second's worth of moves each.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import islice
from math import ceil, floor

Part = tuple[str, int]
SCAN = 16  # candidates looked at per move: the best of the first SCAN valid ones
MAX_SWAPS = 2000  # disk-balance swaps at most


class PlanError(Exception):
    """Input the proposer cannot honour: unknown broker, too few brokers or racks."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class _State:
    """The assignment being built and the per-broker tallies the goals read."""

    def __init__(self, assignment, brokers, rack_of, sizes):
        self.target = {p: list(r) for p, r in assignment.items()}
        self.brokers = sorted(brokers)
        self.rack_of = rack_of
        self.size = sizes
        self.count = dict.fromkeys(self.brokers, 0)
        self.bytes = dict.fromkeys(self.brokers, 0)
        self.leaders = dict.fromkeys(self.brokers, 0)
        self.topic_count: dict[tuple[str, int], int] = defaultdict(int)
        self.hosted: dict[int, dict[Part, None]] = {b: {} for b in self.brokers}
        # (src, dst) pairs with no possible move, and the versions they were found at: a
        # pair may have one again once src gained a replica or dst lost one, or when a
        # partition on src left dst's rack (replace() forgets those pairs).
        self.adds = dict.fromkeys(self.brokers, 0)
        self.rems = dict.fromkeys(self.brokers, 0)
        self.stuck: dict[tuple[int, int], tuple[int, int]] = {}
        self.on_rack: dict[str, list[int]] = defaultdict(list)
        for b in self.brokers:
            self.on_rack[rack_of[b]].append(b)

    def tally(self):
        for part, replicas in self.target.items():
            for b in replicas:
                self._add(part, b)
            if replicas and replicas[0] in self.leaders:
                self.leaders[replicas[0]] += 1

    def _add(self, part: Part, b: int):
        if b in self.count:
            self.count[b] += 1
            self.bytes[b] += self.size.get(part, 0)
            self.topic_count[(part[0], b)] += 1
            self.hosted[b][part] = None
            self.adds[b] += 1

    def _remove(self, part: Part, b: int):
        if b in self.count:
            self.count[b] -= 1
            self.bytes[b] -= self.size.get(part, 0)
            self.topic_count[(part[0], b)] -= 1
            self.hosted[b].pop(part, None)
            self.rems[b] += 1

    def replace(self, part: Part, old: int, new: int):
        replicas = self.target[part]
        i = replicas.index(old)
        replicas[i] = new
        left = self.rack_of.get(old)
        if left != self.rack_of[new] and self.stuck:
            for holder in replicas:
                for dst in self.on_rack.get(left, ()):
                    self.stuck.pop((holder, dst), None)
        self._remove(part, old)
        self._add(part, new)
        if i == 0:
            if old in self.leaders:
                self.leaders[old] -= 1
            self.leaders[new] += 1

    def rack_ok(self, replicas: list[int], need: int) -> bool:
        return len({self.rack_of[b] for b in replicas}) >= need


def _racks(racks: dict[int, str | None]) -> dict[int, str]:
    with_rack = [b for b, r in racks.items() if r]
    if with_rack and len(with_rack) != len(racks):
        missing = sorted(b for b, r in racks.items() if not r)
        raise PlanError(
            f"Brokers {missing} have no broker.rack while others have one: rack-aware "
            "placement needs a rack on every broker (as Kafka requires).",
            "brokers",
        )
    return {b: (r if r else f"broker-{b}") for b, r in racks.items()}


def propose(
    assignment: dict[Part, list[int]],
    racks: dict[int, str | None],
    sizes: dict[Part, int] | None = None,
    *,
    remove: list[int] | tuple = (),
    replication_factors: dict[str, int] | None = None,
) -> dict[Part, list[int]]:
    """The target assignment: every partition of `assignment`, replicas on the brokers of
    `racks` (id -> rack or None) minus `remove`; `replication_factors` sets a topic's RF.
    Raises PlanError (nothing proposed) when the input cannot be met."""
    unknown = sorted(set(remove) - set(racks))
    if unknown:
        raise PlanError(f"Unknown broker(s) {unknown}: not registered in the cluster.", "brokers")
    brokers = set(racks) - set(remove)
    if not brokers:
        raise PlanError("No broker would be left to hold replicas.", "brokers")
    rack_of = _racks(racks)
    rfs = replication_factors or {}
    topics = {t for t, _ in assignment}
    missing = sorted(set(rfs) - topics)
    if missing:
        raise PlanError(f"Unknown topic(s) {missing}.", "topics")
    for topic, rf in sorted(rfs.items()):
        if rf < 1 or rf > len(brokers):
            raise PlanError(
                f"Replication factor {rf} for {topic!r} needs between 1 and {len(brokers)} "
                f"brokers; {len(brokers)} would hold replicas.",
                "replication_factor",
            )
    too_big = [p for p, r in assignment.items() if p[0] not in rfs and len(r) > len(brokers)]
    if too_big:
        t, p = min(too_big)
        raise PlanError(
            f"{t}-{p} has {len(assignment[(t, p)])} replicas but only {len(brokers)} brokers "
            "would be left: lower its replication factor first.",
            "brokers",
        )
    state = _State(assignment, brokers, {b: rack_of[b] for b in racks}, sizes or {})
    state.tally()
    n_racks = len({rack_of[b] for b in brokers})
    _hard_goals(state, rfs, brokers, n_racks)
    _replica_balance(state, n_racks)
    _disk_balance(state, n_racks)
    _leader_balance(state)
    return state.target


def _need(rf: int, n_racks: int) -> int:
    return min(rf, n_racks)


def _hard_goals(state: _State, rfs: dict[str, int], brokers: set[int], n_racks: int):
    """Replicas off removed or unknown brokers, replication factors, rack awareness."""
    for part in sorted(state.target):
        replicas = state.target[part]
        rf = rfs.get(part[0], len(replicas))
        keep: list[int] = []
        for b in replicas:
            if b in brokers and b not in keep:
                keep.append(b)
        while len(keep) > rf:  # drop the most loaded follower
            drop = max(keep[1:], key=lambda b: (state.count[b], b))
            keep.remove(drop)
        need = _need(rf, n_racks)
        while not state.rack_ok(keep, min(need, len(keep))) and len(keep) > 1:
            seen, dup = set(), None
            for b in keep:
                if state.rack_of[b] in seen:
                    dup = b
                seen.add(state.rack_of[b])
            keep.remove(dup)
        while len(keep) < rf:
            racks_used = {state.rack_of[b] for b in keep}
            fresh = len(racks_used) < need
            choices = [
                b
                for b in state.brokers
                if b not in keep and (not fresh or state.rack_of[b] not in racks_used)
            ]
            keep.append(min(choices, key=lambda b: (state.count[b], state.bytes[b], b)))
        if keep != replicas:
            _set(state, part, keep)


def _set(state: _State, part: Part, new: list[int]):
    old = state.target[part]
    for b in old:
        state._remove(part, b)
    if old and old[0] in state.leaders:
        state.leaders[old[0]] -= 1
    state.target[part] = new
    for b in new:
        state._add(part, b)
    state.leaders[new[0]] += 1


def _movable(state: _State, part: Part, src: int, dst: int, n_racks: int) -> bool:
    replicas = state.target[part]
    if dst in replicas:
        return False
    rack_of = state.rack_of
    rack = rack_of[dst]
    if rack_of[src] == rack:
        return True  # racks unchanged
    racks = {rack_of[b] for b in replicas if b != src}
    racks.add(rack)
    return len(racks) >= min(len(replicas), n_racks)


def _best_move(state: _State, src: int, dst: int, n_racks: int) -> Part | None:
    """Of the first SCAN parts on src that may go to dst, the one whose topic is most
    over-represented on src, then the one that best evens bytes. Parts that cannot go
    are moved to the back of src's list, so later scans do not wade through them again."""
    gap = (state.bytes[src] - state.bytes[dst]) / 2
    best, best_key, seen = None, None, 0
    hosted = state.hosted[src]
    skipped = []
    for part in hosted:
        if not _movable(state, part, src, dst, n_racks):
            skipped.append(part)
            continue
        t = part[0]
        spread = state.topic_count[(t, src)] - state.topic_count[(t, dst)]
        key = (-spread, abs(gap - state.size.get(part, 0)))
        if best_key is None or key < best_key:
            best, best_key = part, key
        seen += 1
        if seen >= SCAN:
            break
    for part in skipped:
        del hosted[part]
        hosted[part] = None
    return best


def _replica_balance(state: _State, n_racks: int):
    """Move replicas from the most to the least loaded brokers until counts differ by
    at most one (or no move keeps racks whole)."""
    stuck = state.stuck
    while True:
        order = sorted(state.brokers, key=lambda b: (state.count[b], state.bytes[b]))
        moved = False
        for src in reversed(order):
            for dst in order:
                if state.count[src] - state.count[dst] <= 1:
                    break
                version = (state.adds[src], state.rems[dst])
                if stuck.get((src, dst)) == version:
                    continue
                part = _best_move(state, src, dst, n_racks)
                if part is None:
                    stuck[(src, dst)] = version
                    continue
                state.replace(part, src, dst)
                moved = True
                break
            if moved:
                break
        if not moved:
            return


def _disk_balance(state: _State, n_racks: int):
    """Swap a big replica on the fullest broker for a smaller one on the emptiest (counts
    stay), while that narrows the gap."""
    for _ in range(MAX_SWAPS):
        hi = max(state.brokers, key=lambda b: state.bytes[b])
        lo = min(state.brokers, key=lambda b: state.bytes[b])
        gap = state.bytes[hi] - state.bytes[lo]
        if gap <= 0 or not _swap(state, hi, lo, gap, n_racks):
            return


def _swap(state: _State, hi: int, lo: int, gap: int, n_racks: int) -> bool:
    big = list(islice((p for p in state.hosted[hi] if _movable(state, p, hi, lo, n_racks)), 256))
    small = list(islice((p for p in state.hosted[lo] if _movable(state, p, lo, hi, n_racks)), 256))
    if not big or not small:
        return False
    big.sort(key=lambda p: state.size.get(p, 0))
    small.sort(key=lambda p: state.size.get(p, 0))
    best, best_left = None, gap
    for p in big[-SCAN:]:
        for q in small[:SCAN]:
            delta = state.size.get(p, 0) - state.size.get(q, 0)
            if 0 < delta < gap and abs(gap - 2 * delta) < best_left:
                best, best_left = (p, q), abs(gap - 2 * delta)
    if best is None:
        return False
    state.replace(best[0], hi, lo)
    state.replace(best[1], lo, hi)
    return True


def _leader_balance(state: _State):
    """Reorder replica lists so preferred leaders per broker differ by at most one."""
    total = sum(state.leaders.values())
    high = ceil(total / len(state.brokers))
    low = floor(total / len(state.brokers))
    for part in sorted(state.target):
        replicas = state.target[part]
        lead = replicas[0]
        if state.leaders[lead] <= high:
            continue
        other = min(replicas[1:], key=lambda b: state.leaders[b], default=None)
        if other is not None and state.leaders[other] < high:
            _lead(state, part, other)
    for part in sorted(state.target):  # lift brokers still under the floor
        replicas = state.target[part]
        lead = replicas[0]
        under = [b for b in replicas[1:] if state.leaders[b] < low]
        if under and state.leaders[lead] > low:
            _lead(state, part, min(under, key=lambda b: state.leaders[b]))


def _lead(state: _State, part: Part, b: int):
    replicas = state.target[part]
    state.leaders[replicas[0]] -= 1
    replicas.remove(b)
    replicas.insert(0, b)
    state.leaders[b] += 1

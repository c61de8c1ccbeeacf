"""The monitor's 1 s samples: offsets from every broker (log start, HW, per-replica LEO,
lag and size) and every consumer group's committed offsets, turned into deltas for the
pages and into history (rates, lag series, Burrow status)."""

from __future__ import annotations

import logging
from collections import deque

from django.conf import settings

from cluster_client import admin, records, state
from cluster_client.errors import OpError
from console import fmt
from console.monitor import burrow
from console.monitor.deltas import Deltas, add
from livefeed.groups import group_sub, topic_sub

log = logging.getLogger(__name__)
RATE_WINDOW_S = 10.0
MAX_TIMESTAMP_LOOKUPS = 200  # per sample; the rest wait for the next second
SLOW_PER_ROUND = 2_000  # partitions whose log start and size are asked per round


class OffsetSampler:
    """High watermarks and per-replica log-end offsets of every partition each round;
    log start offsets and replica sizes, which move slowly, for SLOW_PER_ROUND
    partitions per round (all of them at least every few seconds)."""

    def __init__(self):
        self.prev: dict | None = None
        self.rounds = 0
        self._live_before: set = set()
        self.hw_history: deque[tuple[float, dict[str, int]]] = deque()
        self.rates: dict[str, dict] = {}

    def sample(self, snap: dict, now: float) -> tuple[dict, Deltas]:
        brokers = {b: (i["host"], i["port"]) for b, i in snap["brokers"].items()}
        live = set(brokers)
        leaders = {
            part: st["leader"] for part, st in snap["states"].items() if st["leader"] in live
        }
        replicas = {(t, p): r for t, a in snap["assignments"].items() for p, r in a.items()}
        slow = self._slow_slice(replicas)
        s = state.sample(brokers, leaders, replicas, slow=slow)
        if slow is not None:
            self._carry_slow(s, replicas, slow)
        self.rounds += 1
        s["ts"] = now
        deltas = self._diff(s, replicas, leaders, live)
        self._topic_rates(s, snap, now, deltas)
        self.prev = s
        return s, deltas

    def _slow_slice(self, replicas: dict) -> set | None:
        """This round's share of the partitions for log start and size (None: all)."""
        if self.prev is None or len(replicas) <= SLOW_PER_ROUND:
            return None
        slices = -(-len(replicas) // SLOW_PER_ROUND)
        turn = self.rounds % slices
        return {part for part in replicas if hash(part) % slices == turn}

    def _carry_slow(self, s: dict, replicas: dict, slow: set) -> None:
        """Outside this round's slice, log start and sizes stay as last seen."""
        prev_start, prev_size = self.prev["start"], self.prev["size"]
        start, size = s["start"], s["size"]
        for part, ids in replicas.items():
            if part in slow:
                continue
            if part in prev_start:
                start.setdefault(part, prev_start[part])
            for b in ids:
                key = (b, part)
                if key in prev_size:
                    size.setdefault(key, prev_size[key])

    def _diff(self, s: dict, replicas: dict, leaders: dict, live: set) -> Deltas:
        prev = self.prev or {"start": {}, "hw": {}, "leo": {}, "lag": {}, "size": {}}
        deltas: Deltas = {}
        for part, reps in replicas.items():
            t, p = part
            sub = topic_sub(t)
            start, hw = s["start"].get(part), s["hw"].get(part)
            if hw != prev["hw"].get(part) or start != prev["start"].get(part):
                add(deltas, sub, f"p:{t}:{p}:hw", fmt.cell(fmt.num(hw), hw))
                add(deltas, sub, f"p:{t}:{p}:start", fmt.cell(fmt.num(start), start))
                records_ = None if hw is None or start is None else hw - start
                add(deltas, sub, f"p:{t}:{p}:records", fmt.cell(fmt.num(records_), records_))
            leader = leaders.get(part)
            size = s["size"].get((leader, part))
            if size != prev["size"].get((leader, part)):
                add(deltas, sub, f"p:{t}:{p}:size", fmt.cell(fmt.size(size), size))
            for b in reps:
                key = (b, part)
                base = f"r:{t}:{p}:{b}"
                leo, lag = s["leo"].get(key), s["lag"].get(key)
                if leo != prev["leo"].get(key):
                    add(deltas, sub, f"{base}:leo", fmt.cell(fmt.num(leo), leo))
                if b not in live:
                    if self.prev is None or b in self._live_before:
                        add(deltas, sub, f"{base}:lag", fmt.cell("offline", None, "txt-err"))
                elif lag != prev["lag"].get(key) or (self.prev and b not in self._live_before):
                    add(
                        deltas,
                        sub,
                        f"{base}:lag",
                        fmt.cell(fmt.num(lag), lag, "txt-warn" if lag else ""),
                    )
                if s["size"].get(key) != prev["size"].get(key):
                    add(deltas, sub, f"{base}:size", fmt.cell(fmt.size(s["size"].get(key))))
        self._live_before = set(live)
        return deltas

    def _topic_rates(self, s: dict, snap: dict, now: float, deltas: Deltas) -> None:
        """Records in per second (HW growth over ~10 s), records and bytes per topic."""
        totals: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for (t, _p), hw in s["hw"].items():
            totals[t] = totals.get(t, 0) + hw
        for (b, (t, p)), n in s["size"].items():
            if snap["states"].get((t, p), {}).get("leader") == b:
                sizes[t] = sizes.get(t, 0) + n
        self.hw_history.append((now, totals))
        while self.hw_history and now - self.hw_history[0][0] > RATE_WINDOW_S:
            self.hw_history.popleft()
        then, old = self.hw_history[0]
        span = now - then
        starts: dict[str, int] = {}
        for (t, _p), v in s["start"].items():
            starts[t] = starts.get(t, 0) + v
        for t, total in totals.items():
            rate_in = (total - old.get(t, total)) / span if span > 0 else None
            info = self.rates.setdefault(t, {})
            info.update({"in": rate_in, "size": sizes.get(t), "hw": total})
            for sub in ("topics", topic_sub(t)):
                add(deltas, sub, f"t:{t}:in", fmt.cell(fmt.rate(rate_in, ""), rate_in or 0))
                add(deltas, sub, f"t:{t}:size", fmt.cell(fmt.size(sizes.get(t)), sizes.get(t)))
            records_ = total - starts.get(t, 0)
            add(deltas, topic_sub(t), f"t:{t}:records", fmt.cell(fmt.num(records_)))
        for gone in set(self.rates) - set(totals):
            del self.rates[gone]


class GroupSampler:
    """Committed offsets of every group -> lag (records and time), Burrow status,
    catch-up estimates, the lag series."""

    def __init__(self):
        self.windows: dict[str, dict[tuple[str, int], burrow.PartitionWindow]] = {}
        self.hw_seen: dict[tuple[str, int], deque] = {}
        self.known_groups: set[str] | None = None
        self.rows_sent: dict[str, dict[str, tuple]] = {}  # group -> partition -> row

    @staticmethod
    def fetch() -> tuple[list, dict, dict] | OpError:
        """Every group, its description and committed offsets (the network part, which
        the monitor runs while the brokers are asked for offsets)."""
        try:
            listed = admin.list_groups()
            ids = [g["group_id"] for g in listed]
            committed = admin.groups_offsets(ids)
            return listed, admin.describe_groups(ids), committed
        except OpError as exc:
            return exc

    def sample(
        self, s: dict, now: float, fetched: tuple | OpError | None = None
    ) -> tuple[dict[str, dict], Deltas, dict[str, float]]:
        deltas: Deltas = {}
        if fetched is None:
            fetched = self.fetch()
        if isinstance(fetched, OpError):
            log.warning("monitor: consumer groups unavailable: %s", fetched.message)
            return {}, deltas, {}
        listed, described, all_committed = fetched
        for part, hw in s["hw"].items():
            seen = self.hw_seen.setdefault(part, deque(maxlen=12))
            seen.append((now, hw))
        ids = {g["group_id"] for g in listed}
        if self.known_groups is not None and ids != self.known_groups:
            add(deltas, "groups", refresh=True)
        self.known_groups = ids
        for gone in set(self.windows) - ids:
            del self.windows[gone]
        for gone in set(self.rows_sent) - ids:
            del self.rows_sent[gone]
        out, consumed = {}, {}
        pending_ts = MAX_TIMESTAMP_LOOKUPS
        for g in listed:
            gid = g["group_id"]
            committed = all_committed[gid]
            if isinstance(committed, OpError):
                log.info("monitor: offsets of %s unavailable: %s", gid, committed.message)
                continue
            info = described.get(gid, {"state": g["state"], "members": []})
            status, pending_ts = self._group(gid, info, committed, s, now, pending_ts, deltas)
            out[gid] = status
            for key, row in status["partitions"].items():
                t = key.rsplit("/", 1)[0]
                consumed[t] = consumed.get(t, 0.0) + (row["rate"] or 0.0)
        return out, deltas, consumed

    def _group(self, gid, info, committed, s, now, budget, deltas):
        windows = self.windows.setdefault(gid, {})
        members = info["members"]
        lagging = {p: o for p, o in committed.items() if p in s["hw"] and o < s["hw"][p]}
        wanted = dict(list(lagging.items())[:budget]) if budget > 0 else {}
        stamps = records.timestamps_at(wanted) if wanted else {}
        budget -= len(wanted)
        rows, statuses = {}, []
        now_ms = now * 1000
        for part, offset in sorted(committed.items()):
            end = s["hw"].get(part)
            if end is None:
                continue
            lag = max(0, end - offset)
            window = windows.setdefault(part, burrow.PartitionWindow())
            window.observe(now, offset, lag)
            st = burrow.partition_status(
                window.commits, now, lag, bool(members), settings.QUILL_LAG_MIN_SPAN_S
            )
            statuses.append(st)
            rate = window.consume_rate(now)
            eta = burrow.catch_up_s(lag, rate, self._produce_rate(part))
            ts = stamps.get(part)
            lag_ms = 0 if lag == 0 else (None if ts is None else max(0, now_ms - ts))
            rows[f"{part[0]}/{part[1]}"] = {
                "committed": offset,
                "end": end,
                "lag": lag,
                "lag_ms": lag_ms,
                "status": st,
                "rate": rate,
                "eta_s": eta,
            }
        status = {
            "at": now,
            "state": info["state"],
            "members": len(members),
            "status": burrow.group_status(statuses) if statuses else "OK",
            "lag": sum(r["lag"] for r in rows.values()),
            "lag_ms": max((r["lag_ms"] or 0 for r in rows.values()), default=0),
            "topics": sorted({p[0] for p in committed}),
            "partitions": rows,
        }
        self._cells(gid, status, deltas)
        return status, budget

    def _produce_rate(self, part) -> float | None:
        seen = self.hw_seen.get(part)
        if not seen or len(seen) < 2 or seen[-1][0] <= seen[0][0]:
            return None
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    def _cells(self, gid: str, status: dict, deltas: Deltas) -> None:
        sub = group_sub(gid)
        cells = {
            f"g:{gid}:state": fmt.cell(
                status["state"], None, "pill " + fmt.status_class(status["state"])
            ),
            f"g:{gid}:status": fmt.cell(
                status["status"], None, "pill " + fmt.status_class(status["status"])
            ),
            f"g:{gid}:members": fmt.cell(str(status["members"]), status["members"]),
            f"g:{gid}:lag": fmt.cell(fmt.num(status["lag"]), status["lag"]),
            f"g:{gid}:lagms": fmt.cell(fmt.duration_ms(status["lag_ms"]), status["lag_ms"]),
        }
        for key, cell in cells.items():
            add(deltas, sub, key, cell)
            add(deltas, "groups", key, cell)
        sent = self.rows_sent.setdefault(gid, {})
        for key, r in status["partitions"].items():
            row = tuple(r.values())
            if sent.get(key) == row:
                continue  # nothing in this row changed since the last round
            sent[key] = row
            t, p = key.rsplit("/", 1)
            base = f"gp:{gid}:{t}:{p}"
            add(deltas, sub, f"{base}:committed", fmt.cell(fmt.num(r["committed"]), r["committed"]))
            add(deltas, sub, f"{base}:end", fmt.cell(fmt.num(r["end"]), r["end"]))
            add(deltas, sub, f"{base}:lag", fmt.cell(fmt.num(r["lag"]), r["lag"]))
            add(
                deltas,
                sub,
                f"{base}:lagms",
                fmt.cell(fmt.duration_ms(r["lag_ms"]), r["lag_ms"] or 0),
            )
            add(deltas, sub, f"{base}:rate", fmt.cell(fmt.rate(r["rate"])))
            eta = "—" if r["eta_s"] is None else f"{r['eta_s']:.0f} s"
            add(deltas, sub, f"{base}:eta", fmt.cell(eta))
            add(
                deltas,
                sub,
                f"{base}:status",
                fmt.cell(r["status"], None, "pill " + fmt.status_class(r["status"])),
            )

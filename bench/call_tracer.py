"""Count a broker's function calls by role (issue 24), loaded only by bench/call_counts.py.

Imported into a broker process before the broker itself (bench/localstack.py's
``prelude``). SIGUSR1 starts counting on the main thread (the event loop's), SIGUSR2
stops and writes the counts as JSON to ``<out_dir>/<pid>.json``. Counting uses
``sys.setprofile``: every Python frame entered (a coroutine resumed counts again, as it
costs a frame entry again) and every call of a C function, each charged to a role:
the innermost role root on the stack (ROOTS below), else "other". The broker runs
several times slower while counting; only counts are reported, never time.
"""

from __future__ import annotations

import collections
import cProfile
import json
import os
import signal
import sys

# (file suffix, function name) -> role; the innermost on the stack wins
ROOTS = {
    ("server/handlers/produce.py", "handle_produce"): "leader produce",
    ("server/handlers/fetch.py", "handle_fetch"): "leader serving fetch",
    ("replica/fetcher.py", "_run"): "follower fetch round",
    ("replica/fetcher.py", "_fetch_once"): "follower fetch round",
    ("client/connection.py", "_read_loop"): "follower fetch round",  # before 24's 5th session
    ("client/connection.py", "data_received"): "follower fetch round",  # its read side since
    ("client/connection.py", "_answer"): "follower fetch round",
    ("client/connection.py", "request"): "follower fetch round",
    ("replica/partition.py", "maybe_advance_high_watermark"): "HW advance, DelayedProduce",
    ("replica/partition.py", "complete_delayed_produces"): "HW advance, DelayedProduce",
    ("replica/partition.py", "_complete"): "HW advance, DelayedProduce",
    ("replica/partition.py", "settle"): "HW advance, DelayedProduce",
    ("server/network.py", "_send_in_order"): "response encode+send",
    ("server/network.py", "_start_sending"): "response encode+send",
    ("server/network.py", "send"): "response encode+send",
    ("server/network.py", "then"): "response encode+send",
    ("server/network.py", "done"): "response encode+send",
    ("server/apis.py", "_encode"): "response encode+send",
    ("server/apis.py", "_encode_later"): "response encode+send",
    ("server/network.py", "data_received"): "request read+dispatch",
    ("server/network.py", "_work"): "request read+dispatch",
    ("server/apis.py", "handle"): "request read+dispatch",
}

_info: dict = {}
_out_dir = ""
_idle = cProfile.Profile()
calls: collections.Counter = collections.Counter()  # (role, kind) -> n
funcs: collections.Counter = collections.Counter()  # (role, function) -> n
_stack: list[str] = []


def _code_info(code) -> tuple[str, str]:
    """(role root's role or "", a short name) of a code object, cached."""
    info = _info.get(code)
    if info is None:
        path = code.co_filename
        role = next(
            (
                r
                for (suffix, name), r in ROOTS.items()
                if code.co_name == name and path.endswith(suffix)
            ),
            "",
        )
        info = _info[code] = (role, f"{'/'.join(path.split('/')[-2:])}:{code.co_qualname}")
    return info


def _profile(frame, event, arg):
    if event == "call":
        role, name = _code_info(frame.f_code)
        if not role:
            role = _stack[-1] if _stack else "other"
        _stack.append(role)
        calls[role, "py"] += 1
        funcs[role, name] += 1
    elif event == "return":
        if _stack:
            _stack.pop()
    elif event == "c_call":
        role = _stack[-1] if _stack else "other"
        calls[role, "c"] += 1
        funcs[role, "C " + getattr(arg, "__qualname__", "?")] += 1


def _start(*_):
    calls.clear()
    funcs.clear()
    _stack.clear()
    sys.setprofile(_profile)


def _stop(*_):
    _idle.enable()
    if _out_dir:
        out = os.path.join(_out_dir, f"{os.getpid()}.json")
        data = {
            "calls": [[r, k, n] for (r, k), n in calls.items()],
            "funcs": [[r, f, n] for (r, f), n in funcs.most_common(5000)],
        }
        with open(out, "w") as f:
            json.dump(data, f)


def install(out_dir: str) -> None:
    """Before the broker starts. On 3.11 a profile function set from a signal handler
    reaches only frames entered below the handler's caller: the event loop's own frames,
    entered before, would stay unprofiled. So profiling is on from the start, with
    cProfile's C hook (cheap) until SIGUSR1 swaps in the counting one."""
    global _out_dir
    _out_dir = out_dir
    _idle.enable()
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)

"""Rolling restart (Strimzi's KafkaRoller rules) and broker decommission.

Rolling restart: the brokers one at a time, the controller last. Before each, the
availability gate: no partition may be under-replicated, and none may have this broker
in an ISR that is at `min.insync.replicas` (restarting would leave it under min ISR) or
be already under min ISR with a replica here; the job waits for the gate (pausable,
cancellable) and fails, having restarted nothing more, when it stays shut past
`gate_timeout_s`. Then the driver restarts the broker (controlled shutdown first), and
the job waits until the broker is registered again, every replica it hosts is back in
its ISR, and no partition is under-replicated. Done brokers are kept in the checkpoint,
so a resumed job goes on with the next.

Decommission: the remove-broker reassignment (operations.kinds.reassign), then, when the
driver can stop brokers, a controlled shutdown of the drained broker.
"""

from __future__ import annotations

from cluster_client import state as cluster_state
from operations import cluster
from operations.jobs import Job, JobFailed, runner
from operations.kinds.reassign import Execution, parse_plan
from operations.restart import RestartError, get_driver

GATE_TIMEOUT_S = 300
BACK_TIMEOUT_S = 300
RESTART_TIMEOUT_S = 180


def _hosted(broker: int) -> dict[tuple[str, int], list[int]]:
    return {p: r for p, r in cluster.assignment().items() if broker in r}


def gate(broker: int) -> str | None:
    """Why restarting `broker` now would hurt availability, or None when it may go."""
    every = cluster.assignment()
    states = cluster.isr(sorted(every))
    under = [p for p, r in every.items() if p in states and len(states[p]["isr"]) < len(r)]
    if under:
        t, p = min(under)
        return f"{len(under)} partition(s) are under-replicated ({t}-{p} first)"
    mine = [p for p, r in every.items() if broker in r]
    min_isr = cluster_state.min_isrs(sorted({t for t, _ in mine})) if mine else {}
    for t, p in sorted(mine):
        isr = states.get((t, p), {}).get("isr", [])
        need = min_isr.get(t, 1)
        if broker in isr and len(isr) <= need and need > 1:
            return (
                f"{t}-{p} has ISR {isr} at min.insync.replicas={need}: restarting broker "
                f"{broker} would leave it under min ISR"
            )
        if len(isr) < need:
            return f"{t}-{p} is already under min.insync.replicas={need} (ISR {isr})"
    return None


def _back(broker: int) -> bool:
    if broker not in cluster.brokers():
        return False
    hosted = _hosted(broker)
    states = cluster.isr(sorted(hosted))
    if any(broker not in states.get(p, {}).get("isr", []) for p in hosted):
        return False
    return gate(-1) is None  # no partition under-replicated


def _order(job: Job, wanted: list[int] | None) -> list[int]:
    if "order" not in job.checkpoint:
        live = sorted(cluster.brokers())
        chosen = live if wanted is None else [b for b in live if b in wanted]
        controller = cluster_state.zk.controller()
        order = [b for b in chosen if b != controller] + [b for b in chosen if b == controller]
        job.save_checkpoint(order=order, done=[], controller=controller)
    return job.checkpoint["order"]


@runner("rolling-restart")
def run_rolling_restart(job: Job) -> dict:
    driver = get_driver()
    why = driver.available()
    if why:
        raise JobFailed(why)
    order = _order(job, job.params.get("brokers"))
    gate_s = float(job.params.get("gate_timeout_s") or GATE_TIMEOUT_S)
    job.step(
        f"order {order} (controller {job.checkpoint.get('controller')} last), driver {driver.name}"
    )
    restarted = list(job.checkpoint.get("restarted", []))
    for broker in order:
        if broker in job.checkpoint.get("done", []):
            continue
        job.progress(total=len(order), done=len(job.checkpoint["done"]), current=broker)
        shut = gate(broker)
        if shut:
            job.step(f"broker {broker}: waiting, {shut}")
            try:
                job.wait_for(
                    f"broker {broker}'s availability gate", lambda b=broker: gate(b) is None, gate_s
                )
            except JobFailed:
                raise JobFailed(
                    f"Broker {broker} cannot restart safely: {gate(broker) or shut}. "
                    f"Restarted so far: {restarted or 'none'}.",
                    {"restarted": restarted},
                ) from None
        job.step(f"broker {broker}: controlled shutdown and restart")
        try:
            answer = driver.restart(broker, RESTART_TIMEOUT_S)
        except RestartError as exc:
            raise JobFailed(str(exc), {"restarted": restarted}) from None
        job.step(f"broker {broker}: {answer.get('message', 'restarted')}")
        job.wait_for(
            f"broker {broker} back in every ISR", lambda b=broker: _back(b), BACK_TIMEOUT_S
        )
        restarted.append(
            {"broker": broker, "old_pid": answer.get("old_pid"), "new_pid": answer.get("new_pid")}
        )
        job.save_checkpoint(done=[*job.checkpoint["done"], broker], restarted=restarted)
        job.step(
            f"broker {broker}: registered, its replicas in sync, no partition under-replicated"
        )
    job.progress(total=len(order), done=len(order), current=None)
    return {"restarted": restarted}


@runner("decommission")
def run_decommission(job: Job) -> dict:
    broker = int(job.params["broker"])
    target = parse_plan(job.params["plan"])
    moved = Execution(job, target).run()
    left = _hosted(broker)
    if left:
        t, p = min(left)
        raise JobFailed(f"Broker {broker} still hosts {len(left)} replica(s) ({t}-{p} first).")
    driver = get_driver()
    stop = getattr(driver, "stop", None)
    if stop is None or driver.available():
        job.step(
            f"broker {broker} holds no replica now; stop its process with your process "
            f"manager (the {driver.name} driver cannot stop brokers)"
        )
        return {**moved, "stopped": False}
    stop(broker, RESTART_TIMEOUT_S)
    job.step(f"broker {broker}: controlled shutdown done, stopped")
    return {**moved, "stopped": True}

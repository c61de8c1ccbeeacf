"""Preferred (or unclean) leader election for every partition or chosen ones, through
ElectLeaders, with a report of what moved: partition, leader before and after.

Asked for every partition (no list), Kafka's controller answers only the partitions it
elected or failed to, leaving out those whose preferred replica already leads; the job
counts those itself, so "N already preferred" and the progress are over every
partition in scope."""

from __future__ import annotations

from operations import cluster
from operations.jobs import Job, JobFailed, runner

TYPES = {"preferred": 0, "unclean": 1}


@runner("elect-leaders")
def run_election(job: Job) -> dict:
    wanted = job.params.get("partitions")
    parts = None if wanted is None else [(str(t), int(p)) for t, p in wanted]
    election = job.params.get("election_type", "preferred")
    if election not in TYPES:
        raise JobFailed(f"election_type must be one of {', '.join(TYPES)}.")
    scope = sorted(cluster.assignment()) if parts is None else parts
    before = {p: s["leader"] for p, s in cluster.isr(scope).items()}
    job.step(f"{election} election for {'every partition' if parts is None else len(parts)}")
    job.check()
    answers = cluster.elect_leaders(parts, TYPES[election])
    after = {p: s["leader"] for p, s in cluster.isr(scope).items()}
    elected, failed = [], []
    not_needed = sum(1 for part in scope if part not in answers)  # left out: already preferred
    for (t, p), (code, message) in sorted(answers.items()):
        row = {"topic": t, "partition": p, "from": before.get((t, p)), "to": after.get((t, p))}
        if code == "NONE":
            elected.append(row)
        elif code == "ELECTION_NOT_NEEDED":
            not_needed += 1
        else:
            failed.append({**row, "error": code, "message": message})
    job.progress(total=len(scope), done=len(scope))
    job.step(
        f"{len(elected)} leader(s) moved, {not_needed} already preferred, {len(failed)} failed"
    )
    return {"elected": elected, "not_needed": not_needed, "failed": failed}

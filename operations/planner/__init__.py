"""The goal-based reassignment proposer (after Cruise Control's goals, in priority order):

1. rack awareness (hard): a partition's replicas sit on as many distinct racks as it can
   (min(RF, racks)); a proposal never breaks it, and refuses input that cannot meet it;
2. replica count balance: replicas per broker differ by at most one;
3. leader count balance: preferred leaders (first replicas) per broker differ by at most
   one, by reordering replica lists (no data moves);
4. disk balance: a replica moved off a heavy broker is the one that best evens bytes;
5. topic replica spread: moves prefer topics over-represented on the source broker.

Plus the operator's intents: *add broker* (new brokers take their share), *remove
broker* (every replica leaves it), *change replication factor*. Pure functions over
plain data: {(topic, partition): [replicas]}, {broker: rack}, {(topic, partition): bytes};
no cluster needed, so the benchmark and unit tests run it directly.
"""

from operations.planner.goals import PlanError, propose
from operations.planner.report import Proposal, describe

__all__ = ["PlanError", "Proposal", "describe", "propose"]

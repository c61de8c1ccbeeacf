"""The controller: one broker, elected through the ephemeral ``/controller`` znode.

Like Kafka's KafkaController it works through a single event thread (ZooKeeper
watches and callers only enqueue events), so its decisions never race each other; a
ControlledShutdown goes ahead of the events already queued (``event_queue.py``). It
decides partition leaders and writes ``/brokers/topics/<t>/partitions/<p>/state``
with conditional writes, carrying its ``/controller_epoch``; at the end of each event
the ControllerBrokerRequestBatch (``request_batch.py``) sends the brokers what the event
changed: LeaderAndIsr, StopReplica, and UpdateMetadata with only those partitions.

What it does:

- elects itself (and resigns when its ZooKeeper session is lost); a new controller
  loads the cluster (``context.py``), sends every broker the full picture and resumes
  reassignments in progress;
- new topics and partitions: NewPartition -> OnlinePartition
  (``partition_state_machine.py``);
- broker changes: leaders move off brokers that left to a live in-sync replica,
  offline partitions come back when an in-sync replica returns (unclean elections
  where unclean.leader.election.enable allows), dead brokers leave ISRs; a broker that
  (re)joins gets the full metadata and every LeaderAndIsr it needs;
- controlled shutdown (ControlledShutdown from a stopping broker) and log dir failures
  (``log_dir_events.py``): its replicas become OfflineReplica
  (``replica_state_machine.py``);
- ISR changes the leaders report through ``/isr_change_notification`` (batched, read
  once, deleted), passed on to every broker's metadata;
- leader elections: ElectLeaders and ``/admin/preferred_replica_election``
  (``election.py``), and the periodic preferred-leader rebalance
  (auto.leader.rebalance.enable);
- partition reassignment (AlterPartitionReassignments and
  ``/admin/reassign_partitions``, ``reassignment.py``);
- topic deletion (``/admin/delete_topics``): the topic's znodes go, its replicas get
  StopReplica (delete) and every broker's metadata the deletion sentinel leader -2.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..protocol.errors import ErrorCode
from ..zk.client import ControllerMovedError, KafkaZkClient
from ..zk.znodes import (
    BrokerIdsZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode,
    TopicAssignment,
    TopicsZNode,
    TopicZNode,
)
from . import election, log_dir_events, partition_state_machine, replica_state_machine
from .channel import ControllerChannel
from .context import ControllerContext
from .event_queue import ControllerEventQueue
from .reassignment import REASSIGN_PATH, Reassigner
from .request_batch import ControllerBrokerRequestBatch

log = logging.getLogger(__name__)


#: calls that go ahead of queued events (event_queue.py): a stopping broker waits on
#: its ControlledShutdown for at most controller.socket.timeout.ms
URGENT_CALLS = frozenset({"controlled_shutdown"})


class NotControllerError(RuntimeError):
    pass


class StaleBrokerEpochError(RuntimeError):
    """A broker's request carries the epoch of a registration older than the one the
    controller knows (Kafka's StaleBrokerEpochException: STALE_BROKER_EPOCH)."""


class _TrackingZk:
    """The controller's ZooKeeper client: every state or assignment it writes is marked,
    so the end of the event sends exactly those partitions to the brokers. Those writes
    check ``fence``, the /controller_epoch version this controller was elected at
    (ControllerMovedError once another broker has become the controller)."""

    def __init__(self, zk: KafkaZkClient, batch: ControllerBrokerRequestBatch) -> None:
        self._zk = zk
        self._batch = batch
        self.fence: int | None = None

    def __getattr__(self, name):
        return getattr(self._zk, name)

    def update_partition_state(self, topic, partition, state):
        version = self._zk.update_partition_state(topic, partition, state, self.fence)
        if version is None:
            self._batch.states_lost([(topic, partition)])
        else:
            self._batch.states_written({(topic, partition): replace(state, zk_version=version)})
        return version

    def update_partition_states(self, states):
        written = self._zk.update_partition_states(states, self.fence)
        self._batch.states_written(
            {k: replace(states[k], zk_version=v) for k, v in written.items() if v is not None}
        )
        self._batch.states_lost(k for k, v in written.items() if v is None)
        return written

    def create_partition_states(self, topic, states):
        self._zk.create_partition_states(topic, states)
        self._batch.topics_changed([topic])

    def set_topic_assignment(self, topic, assignment):
        self._zk.set_topic_assignment(topic, assignment, self.fence)
        self._batch.topics_changed([topic])

    def delete_topic_znodes(self, topic):
        self._zk.delete_topic_znodes(topic)
        self._batch.topics_changed([topic])


class Controller:
    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        unclean_default: bool = False,
        *,
        auto_rebalance: bool = True,
        imbalance_interval_s: float = 300.0,
        imbalance_percentage: int = 10,
        channel: ControllerChannel | None = None,
        listener: str = "PLAINTEXT",
        election_timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> None:
        self.channel = channel
        self.ctx = ControllerContext(zk, listener)
        self.batch = ControllerBrokerRequestBatch()
        # a context manager timing each broker change (LeaderElectionRateAndTimeMs)
        self.election_timer = election_timer or contextlib.nullcontext
        self.unclean_default = unclean_default
        self.auto_rebalance = auto_rebalance
        self.imbalance_interval_s = imbalance_interval_s
        self.imbalance_percentage = imbalance_percentage
        self.unclean_elections = 0
        self.zk = _TrackingZk(zk, self.batch)
        self.client = zk.zk
        self.broker_id = broker_id
        self.epoch: int | None = None
        self._events = ControllerEventQueue()
        self._thread = threading.Thread(target=self._run, name="controller", daemon=True)
        self._watching = False
        self._stopped = False
        self._topic_watches: set[str] = set()
        self.reassigner = Reassigner(self)
        self._isr_lock = threading.Lock()
        self._isr_children: list[str] = []
        self._isr_event_pending = False
        self._isr_handled: set[str] = set()
        self.isr_notifications_read = 0

    @property
    def is_active(self) -> bool:
        return self.epoch is not None

    def start(self) -> None:
        self._thread.start()
        if self.auto_rebalance:
            threading.Thread(
                target=self._rebalance_timer, name="leader-rebalance", daemon=True
            ).start()
        DataWatch(
            self.client,
            ControllerZNode.path,
            lambda data, _s: self._events.put(("elect",), urgent=True),
        )
        self.client.add_listener(self._session_listener)

    def _rebalance_timer(self) -> None:
        while not self._stopped:
            time.sleep(self.imbalance_interval_s)
            self._events.put(("auto_rebalance",))

    def submit(self, name: str, *args) -> concurrent.futures.Future:
        """Run ``_on_<name>(*args)`` on the controller thread; its result in a Future.
        URGENT_CALLS go ahead of the events already queued."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._events.put(("call", fut, name, args), urgent=name in URGENT_CALLS)
        return fut

    def stop(self) -> None:
        """Stop after the event being handled; queued events are dropped (their callers
        get NotControllerError), so a backlog never holds a broker's shutdown."""
        self._stopped = True
        self._events.put(("stop",), urgent=True)
        self._thread.join(timeout=5)

    def _fail_pending_calls(self) -> None:
        for event in self._events.drain():
            if event[0] == "call" and not event[1].done():
                event[1].set_exception(NotControllerError(f"broker {self.broker_id} is stopping"))

    def _session_listener(self, state) -> None:
        # urgent: nothing queued may act as controller after its session is gone (Kafka's
        # clearAndPut(Expire)), and a shutdown must not overtake a change of controller
        if state == KazooState.LOST:
            self._events.put(("resign",), urgent=True)
        elif state == KazooState.CONNECTED:
            self._events.put(("elect",), urgent=True)

    # -- event thread --------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event[0] == "stop" or self._stopped:  # what is still queued is dropped
                self._fail_pending_calls()
                return
            try:
                getattr(self, "_on_" + event[0])(*event[1:])
                self._publish()
            except ControllerMovedError as exc:
                self._moved(event[0], exc)
            except Exception:
                log.exception("controller event %s failed", event[0])

    def _moved(self, event: str, exc: ControllerMovedError) -> None:
        """A write of ``event`` found another controller in charge: what the event
        decided is dropped (not sent to the brokers) and this broker resigns. Should
        ``/controller`` still name this broker (its own ephemeral znode), it is deleted:
        with a fence that no longer matches, every write of ours would be refused, so
        the brokers elect again (each one's watch fires) and the winner fences anew."""
        log.warning("controller event %s stopped: %s", event, exc)
        self.batch.clear()
        self._on_resign("another broker is the controller now")
        try:
            if self.zk.get_controller_id() == self.broker_id:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(ControllerZNode.path)
        except Exception as err:  # noqa: BLE001 - ZooKeeper unreachable: the event thread lives on
            log.warning("could not check /controller after resigning: %r", err)

    def _on_call(self, fut: concurrent.futures.Future, name: str, args: tuple) -> None:
        try:
            fut.set_result(getattr(self, "_on_" + name)(*args))
        except ControllerMovedError as exc:
            fut.set_exception(NotControllerError(str(exc)))
            self._moved(name, exc)
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            fut.set_exception(exc)

    def _on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> list[tuple[str, int]]:
        """Move leadership off ``broker_id`` and take it out of every ISR, before it stops.

        Returns the partitions whose move failed (a conditional write lost a race);
        the broker retries until that list is empty. Partitions with no other live
        in-sync replica cannot move and are not waited for. A ``broker_epoch`` older
        than the broker's registration (a request of its previous life) is refused, as
        Kafka's KIP-380 controller does; -1 (unknown) is taken.
        """
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        info = self.ctx.brokers.get(broker_id)
        if broker_epoch >= 0 and info is not None and broker_epoch < info.epoch:
            raise StaleBrokerEpochError(
                f"broker {broker_id}'s controlled shutdown carries broker epoch "
                f"{broker_epoch}, older than its registration's {info.epoch}"
            )
        self.ctx.shutting_down.add(broker_id)
        written = replica_state_machine.make_offline(self, broker_id, self._hosted(broker_id))
        remaining = sorted(key for key, version in written.items() if version is None)
        log.info(
            "controlled shutdown of broker %d: %d partition(s) could not move yet",
            broker_id,
            len(remaining),
        )
        return remaining

    def _hosted(self, broker_id: int) -> list[tuple[str, int]]:
        """The partitions ``broker_id`` replicates, from the context (no ZooKeeper read)."""
        return [
            (topic, partition)
            for topic, assignment in self.ctx.assign.items()
            for partition, replicas in assignment.partitions.items()
            if broker_id in replicas
        ]

    def _on_log_dir_events(self, children: list[str]) -> None:
        """Brokers lost a log dir: move leadership and ISR off their offline replicas."""
        if self.epoch is None or not children or self.channel is None:
            return
        for broker_id in sorted(log_dir_events.take_events(self.client, children)):
            info = self.ctx.brokers.get(broker_id)
            endpoint = info.endpoint(self.ctx.listener) if info is not None else None
            if endpoint is None:
                continue  # gone altogether: the broker change handles it
            try:
                offline = log_dir_events.offline_replicas(
                    self.channel.loop,
                    endpoint,
                    self.broker_id,
                    self._hosted(broker_id),
                    self.channel.security,
                )
            except Exception as exc:  # noqa: BLE001 - it may be stopping: its exit will tell
                log.warning("cannot ask broker %d for its log dirs: %r", broker_id, exc)
                continue
            moved, pending = 0, offline
            for _attempt in range(3):  # a conditional write that lost a race: re-read, retry
                written = replica_state_machine.make_offline(self, broker_id, pending)
                moved += sum(1 for v in written.values() if v is not None)
                pending = [key for key, v in written.items() if v is None]
                if not pending:
                    break
            log.warning(
                "broker %d lost a log dir: %d offline replica(s), %d moved off it",
                broker_id,
                len(offline),
                moved,
            )

    def _on_elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders / preferred_replica_election: one result per partition."""
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        live = self.live_brokers()
        if partitions is None:
            partitions = [(t, p) for t, a in self.ctx.assign.items() for p in a.partitions]
        results, decided = {}, {}
        states = self.zk.get_partition_states(list(dict.fromkeys(partitions)))  # pipelined
        for key in partitions:
            assignment = self.zk_assignment(key[0])
            state = states.get(key)
            if assignment is None or key[1] not in assignment.partitions or state is None:
                results[key] = (ErrorCode.unknown_topic_or_partition, "Unknown partition.")
                continue
            code, message, new = election.elect(
                election_type, assignment.partitions[key[1]], state, live, self.epoch
            )
            results[key] = (code, message)
            if new is not None:
                decided[key] = new
        for key, version in self.zk.update_partition_states(decided).items():
            if version is None:
                results[key] = (ErrorCode.not_controller, "The partition state changed; retry.")
            else:
                log.info(
                    "%s-%d: elected %d (%s election, epoch %d)",
                    *key,
                    decided[key].leader,
                    "preferred" if election_type == election.PREFERRED else "unclean",
                    decided[key].leader_epoch,
                )
        return results

    def zk_assignment(self, topic: str) -> TopicAssignment | None:
        """A topic's assignment: the context's, else ZooKeeper's (created just now)."""
        found = self.ctx.assign.get(topic)
        return found if found is not None else self.zk.get_topic_assignment(topic)

    def _on_preferred_znode(self) -> None:
        """``/admin/preferred_replica_election``: elect, then delete the request znode."""
        if self.epoch is None:
            return
        try:
            data, _ = self.client.get(PreferredReplicaElectionZNode.path)
        except NoNodeError:
            return
        partitions = PreferredReplicaElectionZNode.decode(data)
        self._on_elect_leaders(election.PREFERRED, partitions)
        try:
            self.client.delete(PreferredReplicaElectionZNode.path)
        except NoNodeError:
            pass

    def _on_auto_rebalance(self) -> None:
        if self.epoch is None or not self.auto_rebalance:
            return
        assignments = {
            (topic, partition): replicas
            for topic, assignment in self.ctx.assign.items()
            for partition, replicas in assignment.partitions.items()
        }
        states = self.zk.get_partition_states(list(assignments))  # one pipelined batch
        leaders = {key: state.leader for key, state in states.items()}
        assignments = {key: assignments[key] for key in states}
        moves = election.imbalanced(assignments, leaders, self.imbalance_percentage)
        if moves:
            log.info(
                "leader imbalance: moving %d partition(s) back to their preferred leader",
                len(moves),
            )
            self._on_elect_leaders(election.PREFERRED, moves)

    def _on_reassign(self, requests) -> dict:
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        results = self.reassigner.submit(requests)
        self._on_reassign_tick()
        return results

    def _on_list_reassignments(self) -> dict:
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        return self.reassigner.listing()

    def _on_reassign_znode(self) -> None:
        if self.epoch is not None:
            self.reassigner.from_znode()
            self._on_reassign_tick()

    def _on_reassign_tick(self) -> None:
        if self.epoch is None or not self.reassigner.pending:
            return
        self.reassigner.tick()
        if self.reassigner.pending:
            timer = threading.Timer(0.25, self._events.put, args=(("reassign_tick",),))
            timer.daemon = True
            timer.start()

    def _reassign_watch(self, data, _stat) -> bool:
        if data is not None:
            self._events.put(("reassign_znode",))
        return True

    def _isr_watch(self, children: list[str]) -> None:
        """kazoo's thread: remember the latest children; one event while one is pending."""
        with self._isr_lock:
            self._isr_children = children
            if self._isr_event_pending:
                return
            self._isr_event_pending = True
        self._events.put(("isr_notifications",))

    def _on_isr_notifications(self) -> None:
        """Kafka's IsrChangeNotificationHandler: read each new notification once, refresh
        the union of their partitions, tell every broker, and delete what was read."""
        with self._isr_lock:
            children, self._isr_event_pending = self._isr_children, False
        # names still listed but handled already (their delete is on its way) are skipped
        self._isr_handled &= set(children)
        fresh = sorted(c for c in children if c not in self._isr_handled)
        if self.epoch is None or not fresh:
            return
        keys = self.zk.read_isr_change_notifications(fresh)
        self._isr_handled |= set(fresh)
        self.isr_notifications_read += len(fresh)
        self.ctx.refresh_states(keys)
        self.batch.metadata_changed(keys)
        self.zk.delete_isr_change_notifications(fresh)

    def _publish(self) -> None:
        """Send what this event changed (ControllerBrokerRequestBatch), then forget it."""
        if self.batch and self.epoch is not None and self.channel is not None:
            self.batch.send(self)  # raising, it is kept for the next event to send
        self.batch.clear()

    def send_request(
        self, broker: int, api_key: int, version: int, body: dict, coalesce=None
    ) -> None:
        """Queue a controller request to ``broker`` on inter.broker.listener.name."""
        info = self.ctx.brokers.get(broker)
        address = info.endpoint(self.ctx.listener) if info is not None else None
        if address is not None:  # KIP-380: the epoch of the registration we speak to
            body = {**body, "broker_epoch": info.epoch}
            self.channel.send(broker, address, api_key, version, body, coalesce)

    def _on_resign(self, why: str = "ZooKeeper session lost") -> None:
        if self.epoch is not None:
            log.info("broker %d resigns as controller (%s)", self.broker_id, why)
            if self.channel is not None:
                self.channel.close()
        self.epoch = None
        self.zk.fence = None

    def _on_elect(self) -> None:
        if self._stopped:
            return
        current = self.zk.get_controller_id()
        if current == self.broker_id and self.epoch is not None:
            return
        if current is not None and current != self.broker_id:
            self.epoch = None
            self.zk.fence = None
            return
        elected = self.zk.try_become_controller(self.broker_id)
        if elected is None:
            return
        epoch, self.zk.fence = elected
        self.epoch = epoch
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, epoch)
        self.ctx.load()
        self.batch.brokers_joined(self.ctx.brokers)  # everyone gets the full picture
        if not self._watching:
            self._watching = True
            ChildrenWatch(self.client, TopicsZNode.path, lambda c: self._events.put(("topics", c)))
            ChildrenWatch(
                self.client, DeleteTopicsZNode.path, lambda c: self._events.put(("deletes", c))
            )
            ChildrenWatch(
                # urgent, in order with shutdowns: a ControlledShutdown must see the live
                # brokers and broker epochs the registrations before it made
                self.client,
                BrokerIdsZNode.path,
                lambda c: self._events.put(("brokers", c), urgent=True),
            )
            DataWatch(self.client, PreferredReplicaElectionZNode.path, self._preferred_watch)
            DataWatch(self.client, REASSIGN_PATH, self._reassign_watch)
            ChildrenWatch(self.client, IsrChangeNotificationZNode.path, self._isr_watch)
            ChildrenWatch(
                self.client,
                LogDirEventNotificationZNode.path,
                lambda c: self._events.put(("log_dir_events", c)),
            )
        else:  # elected again: the watches exist, so catch up by hand
            self._on_topics(self.zk.get_all_topics(), ensure_all=True)
            self._on_brokers(self.client.get_children(BrokerIdsZNode.path))
            self._isr_watch(self.client.get_children(IsrChangeNotificationZNode.path))
        self.reassigner.resume()
        self._events.put(("reassign_tick",))

    def _on_topics(self, topics: list[str], ensure_all: bool = False) -> None:
        if self.epoch is None:
            return
        for topic in topics:
            if topic not in self.ctx.assign:
                self.batch.topics_changed([topic])
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                # the watch fires at once: its "assignment" event creates missing states
                DataWatch(self.client, TopicZNode.path(topic), self._topic_watch(topic))
            elif ensure_all:
                partition_state_machine.new_partitions(self, topic)
        self._topic_watches &= set(topics)

    def _preferred_watch(self, data, _stat) -> bool:
        if data is not None:
            self._events.put(("preferred_znode",))
        return True  # a False return would end kazoo's watch

    def _topic_watch(self, topic: str):
        def on_change(data, _stat):
            if data is None:
                self._topic_watches.discard(topic)
                return False
            self._events.put(("assignment", topic))
            return True

        return on_change

    def _on_assignment(self, topic: str) -> None:
        if self.epoch is not None:
            self.batch.topics_changed([topic])
            partition_state_machine.new_partitions(self, topic)

    def live_brokers(self) -> set[int]:
        """Registered brokers, less those shutting down (they get no new leadership)."""
        registered = {int(b) for b in self.client.get_children(BrokerIdsZNode.path)}
        return registered - self.ctx.shutting_down

    def _on_deletes(self, topics: list[str]) -> None:
        if self.epoch is None:
            return
        for topic in topics:
            log.info("deleting topic %s", topic)
            self.zk.delete_topic_znodes(topic)

    def _on_brokers(self, children: list[str]) -> None:
        """Brokers came or went: move leadership off dead brokers, drop them from ISRs,
        and bring offline partitions back when an in-sync replica returns."""
        if self.epoch is None:
            return
        with self.election_timer():
            self._broker_change(children)

    def _broker_change(self, children: list[str]) -> None:
        joined, left = self.ctx.refresh_brokers()
        self.ctx.shutting_down -= joined | left  # gone, or back (Kafka's onBrokerStartup)
        live = {int(b) for b in children} - self.ctx.shutting_down
        for broker_id in left:
            if self.channel is not None:
                self.channel.remove_broker(broker_id)
        if joined or left:
            self.batch.brokers_joined(joined)
            self.batch.live_brokers_changed()
        changed = joined | left
        keys = [
            key
            for key, state in self.ctx.states.items()
            if state.leader not in live
            or any(b not in live for b in state.isr)
            or (changed and not changed.isdisjoint(self.ctx.replicas(key)))
        ]
        if keys:
            moved = partition_state_machine.broker_change(self, keys, live)
            log.info(
                "brokers %s joined, %s left: %d partition state(s) changed",
                sorted(joined),
                sorted(left),
                moved,
            )

    def set_unclean_default(self, enabled: bool) -> None:
        """The broker default of unclean.leader.election.enable changed (a dynamic broker
        config). Turned on, offline partitions get their unclean election now, as Kafka's
        KafkaController.enableDefaultUncleanLeaderElection does."""
        was, self.unclean_default = self.unclean_default, enabled
        if enabled and not was:
            self._events.put(("unclean_enabled",))

    def _on_unclean_enabled(self) -> None:
        if self.epoch is not None:
            self._on_brokers(self.zk.zk.get_children(BrokerIdsZNode.path))

    def unclean_allowed(self, topic: str) -> bool:
        value = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        if value is None:
            return self.unclean_default
        return value.strip().lower() == "true"

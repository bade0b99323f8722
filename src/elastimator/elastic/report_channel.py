"""Where a training's reports go, and what each training call's writes wait for: one channel per transport.

A report tells the shard service that a batch was trained ([shard id, lease, first
record, records], its shard tag). The bound the channels keep is the same: a
process that dies has at most one trained batch unreported, and no batch whose
lease the service took back writes to the model. How they keep it differs with
the way the reports travel, so each transport is one class, chosen once, as the
training step is built (`open_channel`):

* `RingChannel` (a trainer on the service's machine, whose reports go into its
  report ring, elastic/report_ring.py): a report in the ring needs no
  acknowledgement, so before each call the host checks one word of the ring (a
  seal pending) and keeps the lease floor in two local variables; the gate is
  graph ops on the batch's lease. No Python runs in the call.
* `AnsweredChannel` (over the report line, gRPC, or a ring the fast gate cannot
  serve): the gate is a Python check in the call, beside the forward pass, that
  waits for the acknowledgement of the previous call's reports and checks the
  batch's lease; the call's writes wait for it.
* `UngatedChannel` (a train op that writes nothing): nothing to hold; each call's
  reports are settled as it ends.

A channel's life, as `feed.ShardReportHook` drives it: `before_call(session)` before
each call (returns the tensor to fetch for the call's reports, or None where the
gate already saw them), `after_call(fetched)` as it ends, `put(tags)` for tags got
otherwise (a call that ended part way), `new_session()` when a session is made
again, `close()` at the end.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import tensorflow as tf

from elastimator.elastic import report_ring
from elastimator.elastic.report_queue import ReportQueue
from elastimator.estimator import plan_gate

GATE_NAME = "shard_reports/settled"


class Leases(Protocol):
    """What a channel asks the feed about leases (`feed.ShardFeed`)."""

    def is_current(self, lease: int) -> bool: ...

    def lease_floor_and_refused(self) -> tuple[int, list[int]]: ...


class ReportChannel(Protocol):
    """One training's reports and the gate on its writes (see the module doc)."""

    def before_call(self, session) -> tf.Tensor | None:
        """Host side, before a call: settles what the call's writes wait for that the gate does not; returns
        the tensor the call must fetch for its reports (None: the gate gets them)."""

    def after_call(self, fetched: np.ndarray | None) -> None:
        """The call ended: puts its reports (from `fetched`, or from what the gate let write)."""

    def put(self, tags: np.ndarray) -> None:
        """Puts the reports of trained batches' tags (one row of 4 per batch)."""

    def new_session(self) -> None:
        """A session was made (again): its local variables start afresh."""

    def close(self) -> None:
        """Waits until every report put is counted; raises what a report raised."""


def open_channel(queue: ReportQueue, leases: Leases, ring: report_ring.ReportRing | None, train_op,
                 tags: tf.Tensor) -> ReportChannel:
    """The channel for a training step whose calls run `train_op` on batches tagged `tags`: reports into `ring`
    where there is one and the gate can decide in the graph; else answered, or ungated where nothing writes."""
    plan = plan_gate(train_op, [tags]) if train_op is not None else None
    if plan is None or not plan.holds_writes:
        return UngatedChannel(queue, tags)
    if ring is not None and plan.decides_in_graph:
        return RingChannel(queue, leases, ring, plan)
    return AnsweredChannel(queue, leases, plan)


def _rows(tags: np.ndarray) -> list[tuple]:
    """One report per batch: several rows when a call ran several steps."""
    return [tuple(row) for row in np.asarray(tags).reshape(-1, 4).tolist()]


class UngatedChannel:
    """A train op that writes nothing: each call's reports are put and settled as it ends."""

    def __init__(self, queue: ReportQueue, tags: tf.Tensor | None):
        self._queue = queue
        self._tags = tags

    def before_call(self, session) -> tf.Tensor | None:
        return self._tags

    def after_call(self, fetched: np.ndarray | None) -> None:
        if fetched is not None:
            self.put(fetched)

    def put(self, tags: np.ndarray) -> None:
        self._queue.put(_rows(tags))
        self._queue.settle()

    def new_session(self) -> None:
        pass

    def close(self) -> None:
        self._queue.close()


class AnsweredChannel:
    """Reports the service answers: the gate, a Python check in the call, waits for the previous call's
    acknowledgement and checks the call's leases.

    With one step per call the gate gets the call's tags, and nothing fetches them; in a call of several steps
    they come out of its loop, after the gate, and the call fetches them.
    """

    def __init__(self, queue: ReportQueue, leases: Leases, plan):
        self._queue = queue
        self._leases = leases
        self._tags = plan.tensors[0]
        self._checked: np.ndarray | None = None
        """The tags the gate let write in the current call."""
        self._gate_sees_tags = plan.given[0]
        plan.in_python(self._may_write, name=GATE_NAME)

    def _may_write(self, tags) -> bool:
        """In each call, before it writes: the previous calls' reports are in, and its batches still leased."""
        self._queue.settle()
        if tags is None:  # several steps per call: the call's tags come out of its loop
            return True
        if not all(self._leases.is_current(lease) for lease in tags.reshape(-1, 4)[:, 1].tolist()):
            return False
        self._checked = tags
        return True

    def before_call(self, session) -> tf.Tensor | None:
        self._checked = None
        return None if self._gate_sees_tags else self._tags

    def after_call(self, fetched: np.ndarray | None) -> None:
        tags = self._checked if self._gate_sees_tags else fetched
        if tags is not None:  # None: the call ran without its gate, so it trained nothing
            self.put(tags)

    def put(self, tags: np.ndarray) -> None:
        self._queue.put(_rows(tags))  # settled by the next call's gate

    def new_session(self) -> None:
        pass

    def close(self) -> None:
        self._queue.close()


class RingChannel:
    """Reports into the trainer's report ring: the gate is graph ops on the call's leases and the lease floor,
    which lives in two local variables that the host sets only when it changes (fed with every call instead, the
    check measured slower than a file read: the README's Speed section)."""

    def __init__(self, queue: ReportQueue, leases: Leases, ring: report_ring.ReportRing, plan):
        self._queue = queue
        self._leases = leases
        self._ring = ring
        self._tags = plan.tensors[0]
        self._floor_set: tuple | None = None
        """The lease floor and refused leases last set in the gate's variables (None: not yet)."""
        plan.in_graph(self._lease_check, name=GATE_NAME)

    def _lease_check(self, tags):
        with tf.name_scope("shard_reports"):
            local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
            floor = tf.compat.v1.Variable(np.int64(report_ring.NO_FLOOR), trainable=False, collections=local,
                                          use_resource=True, name="lease_floor")
            refused = tf.compat.v1.Variable(np.zeros([0], np.int64), trainable=False, collections=local,
                                            use_resource=True, validate_shape=False, shape=tf.TensorShape([None]),
                                            name="refused_leases")
            self._new_floor = tf.compat.v1.placeholder(tf.int64, [], name="new_lease_floor")
            self._new_refused = tf.compat.v1.placeholder(tf.int64, [None], name="new_refused_leases")
            self._set_floor = tf.group(floor.assign(self._new_floor, read_value=False),
                                       refused.assign(self._new_refused, read_value=False), name="set_lease_floor")
        return report_ring.lease_check(tags, floor.read_value(), refused.read_value())

    def before_call(self, session) -> tf.Tensor:
        if self._ring.armed and not self._ring.sealing:
            self._queue.acknowledged()  # the last report is in the ring: nothing to wait for
        else:
            self._queue.settle()  # a seal's commit, or the reply of a report that went answered
        floor, refused = self._leases.lease_floor_and_refused()
        if (floor, refused) != self._floor_set:  # rarely: a rewind, a refusal, the first call
            session.run(self._set_floor, {self._new_floor: floor, self._new_refused: refused})
            self._floor_set = (floor, refused)
        return self._tags

    def after_call(self, fetched: np.ndarray | None) -> None:
        if fetched is not None:
            self.put(fetched)

    def put(self, tags: np.ndarray) -> None:
        self._queue.put(_rows(tags))  # into the ring, or answered where it is full or its line broke

    def new_session(self) -> None:
        self._floor_set = None  # a new session's local variables, the gate's floor among them, start afresh

    def close(self) -> None:
        self._queue.close()

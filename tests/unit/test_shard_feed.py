"""ShardFeed and ShardReportHook against an in-process service: shards in as tagged batches, reports out."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from elastimator.data import ElasticReader
from elastimator.elastic import report_channel
from elastimator.elastic.client import ShardClient
from elastimator.elastic.feed import ShardFeed, ShardReportHook
from elastimator.elastic.report_queue import ReportQueue
from elastimator.elastic.service import ShardService
from elastimator.elastic.shards import SHARD_TAG, ShardingSpec, ShardServiceError
from elastimator.estimator.step import training_step
from elastimator.estimator.step.training_step import TrainingStep

TOKEN = "job-token-123"


class Numbers(ElasticReader):
    def __init__(self, n: int):
        super().__init__()
        self._n = n

    def count_data(self):
        return self._n

    def read_data_by_index_range(self, start_index, end_index):
        return [f"{i},0" for i in range(start_index, end_index)]


@pytest.fixture
def service():
    return ShardService(TOKEN)


def feed_of(service, worker="worker-0", size=10, shard_size=4):
    return ShardFeed(ShardClient.in_process(service, worker), ShardingSpec(name="train", size=size,
                                                                          shard_size=shard_size),
                     heartbeat_secs=60).start()


def test_batches_cover_each_shard_and_carry_their_tag(service):
    feed = feed_of(service)
    reporter = feed.reporter()
    batches = feed.batches(Numbers(10), batch_size=3)
    seen = []
    for numbers, texts, tag in batches:
        shard_id, lease, offset, records = tag.tolist()
        assert records == len(texts) and list(numbers) == list(range(offset + 1, offset + records + 1))
        assert [t.decode() for t in texts] == [f"{i},0" for i in range(offset, offset + records)]
        reporter.put([(shard_id, lease, offset, records)])
        reporter.settle()
        seen.extend(range(offset, offset + records))
    feed.stop()
    assert sorted(seen) == list(range(10))  # shards of 4, 4, 2 records, in batches of at most 3
    assert service.book.status("train")["trained_records"] == 10


def test_a_rewind_makes_the_queued_batches_of_old_leases_stale(service):
    feed = feed_of(service)
    batches = feed.batches(Numbers(10), batch_size=2)
    _, _, tag = next(batches)
    lease = int(tag[1])
    assert feed.is_current(lease)
    chief = ShardClient.in_process(service, "chief-0")
    chief.commit(chief.seal(checkpoint_step=0), checkpoint_step=0)
    chief.restore(0)
    feed.client.heartbeat()  # the worker hears of the rewind
    assert not feed.is_current(lease)
    feed.stop()


def test_the_report_hook_reports_one_row_per_step_of_a_call(service):
    feed = feed_of(service)
    batches = feed.batches(Numbers(10), batch_size=2)
    tags = np.stack([next(batches)[2] for _ in range(3)])  # a call of 3 steps
    hook = ShardReportHook(feed, TrainingStep(loss=None, global_step=None, outputs={SHARD_TAG: None}))
    hook.after_run(None, type("RunValues", (), {"results": tags})())
    hook.end(session=None)  # no train op to gate: the hook waited for the reports as the call ended
    assert service.book.status("train")["trained_records"] == 6


def test_reports_go_out_in_order_each_acknowledged_before_the_next_and_a_failure_is_raised_again():
    events = []

    def start(report):
        shard_id = report[0]
        events.append(("sent", shard_id))

        def acknowledged():
            if shard_id == 3:
                raise ShardServiceError("shard service report failed: UNAVAILABLE")
            events.append(("counted", shard_id))

        return acknowledged

    reporter = ReportQueue(start)
    reporter.put([(1, 0, 0, 2), (2, 0, 2, 2)])
    reporter.put([(0, 0, 4, 2)])
    assert events == [("sent", 1)]  # put sends the first at once; the next waits for its acknowledgement
    reporter.settle()
    assert events == [("sent", 1), ("counted", 1), ("sent", 2), ("counted", 2), ("sent", 0), ("counted", 0)]
    reporter.put([(3, 0, 6, 2)])
    with pytest.raises(ShardServiceError, match="UNAVAILABLE"):
        reporter.settle()
    reporter.put([(4, 0, 8, 2)])
    with pytest.raises(ShardServiceError, match="UNAVAILABLE"):
        reporter.close()
    assert ("sent", 4) not in events


def test_a_report_that_cannot_be_sent_fails_the_next_settle_not_the_put():
    def start(report):
        raise ConnectionError("no route to the shard service")

    reporter = ReportQueue(start)
    reporter.put([(1, 0, 0, 2)])
    with pytest.raises(ConnectionError, match="no route"):
        reporter.settle()


def test_a_waiting_input_settles_the_last_report_that_other_workers_wait_for(service):
    """The last batch of a shard is settled by the next call, or, when no batch comes until other workers'
    shards are done (and theirs may wait for this one), by the input as it waits."""
    mine, other = feed_of(service, "worker-0", size=8), feed_of(service, "worker-1", size=8)
    reporter = mine.reporter()
    settled = threading.Event()
    settle = reporter.settle

    def settle_and_tell():
        settle()
        settled.set()

    reporter.settle = settle_and_tell
    batches = mine.ranges(batch_size=4)
    _, _, tag = next(batches)  # the whole of one shard
    held = other.client.request("train")  # worker-1 holds the other shard: worker-0's next request waits
    handle = service.handle
    service.handle = lambda method, request: {"sealing": True} if method == "report" else handle(method, request)
    reporter.put([tuple(int(x) for x in tag)])  # held back: the chief is saving, say
    service.handle = handle
    assert service.book.status("train")["trained_records"] == 0
    threading.Thread(target=lambda: next(batches, None), daemon=True).start()  # asks for a shard, and waits
    assert settled.wait(timeout=120), "the waiting input never settled its reporter"
    assert service.book.status("train")["trained_records"] == 4
    other.client.report("train", held.shard_id, held.end - held.start, lease=held.lease, offset=held.start)
    mine.stop()
    other.stop()


def test_a_reply_that_comes_back_late_does_not_lower_the_lease_floor(service):
    """Reports and heartbeats travel on different threads: a report's reply, computed before a rewind, can come
    back after a heartbeat's that heard of it. The client keeps the floor the rewind raised."""
    feed = feed_of(service)
    shard = feed.client.request("train")
    chief = ShardClient.in_process(service, "chief-0")
    chief.commit(chief.seal(checkpoint_step=0), checkpoint_step=0)
    answered, go_on = threading.Event(), threading.Event()
    handle = service.handle

    def slow_reports(method, request):
        reply = handle(method, request)
        if method == "report":
            answered.set()
            go_on.wait(10)
        return reply

    service.handle = slow_reports
    reporting = threading.Thread(target=feed.client.report, args=("train", shard.shard_id, 1),
                                 kwargs={"lease": shard.lease, "offset": shard.start})
    reporting.start()
    assert answered.wait(10)
    chief.restore(0)
    feed.client.heartbeat()  # hears of the rewind
    assert not feed.is_current(shard.lease)
    go_on.set()
    reporting.join(10)
    assert not feed.is_current(shard.lease)  # the report's older floor did not bring the lease back
    feed.stop()


def test_a_ring_gate_withdraws_a_batch_of_a_lease_taken_back_in_every_session_of_the_hook(service):
    """The gate's lease floor lives in local variables that each new session starts afresh (a training's session
    is made again after a ps fails): the hook sets them again before the new session's first call."""
    feed = feed_of(service)
    assert feed.client.report_ring is not None
    batches = feed.batches(Numbers(10), batch_size=2)
    old = next(batches)[2]
    chief = ShardClient.in_process(service, "chief-0")
    chief.commit(chief.seal(checkpoint_step=0), checkpoint_step=0)
    chief.restore(0)
    feed.client.heartbeat()  # the worker hears of the rewind: `old`'s lease is taken back
    assert not feed.is_current(int(old[1]))
    with tf.Graph().as_default():
        tag = tf.compat.v1.placeholder(tf.int64, [1, 4])
        global_step = tf.compat.v1.train.get_or_create_global_step()
        train_op = global_step.assign_add(1).op
        hook = ShardReportHook(feed, TrainingStep(loss=None, global_step=global_step, outputs={SHARD_TAG: tag},
                                                  train_op=train_op))
        for _ in range(2):  # two sessions, one hook
            with tf.compat.v1.train.SingularMonitoredSession(hooks=[hook]) as session:
                with pytest.raises(tf.errors.InvalidArgumentError) as withdrawn:
                    session.run(train_op, {tag: old[None]})
                assert training_step.is_withdrawn(withdrawn.value)
                assert session.raw_session().run(global_step) == 0  # nothing written
    feed.stop()
    chief.close()


def test_each_transport_gets_its_own_report_channel_chosen_once_as_the_step_is_built(service):
    """The ring's graph gate where the trainer has a ring and the gate gets the call's tags; the answered
    Python gate where it has none, or where the tags come out of a loop of several steps; none where nothing
    writes."""
    feed = feed_of(service)
    ring = feed.client.report_ring
    assert ring is not None
    with tf.Graph().as_default():
        tag = tf.compat.v1.placeholder(tf.int64, [1, 4])
        global_step = tf.compat.v1.train.get_or_create_global_step()
        train_op = global_step.assign_add(1).op
        with tf.control_dependencies([train_op]):
            after_update = tf.identity(tag)  # as a loop of several steps gives its tags: after its writes
        channels = {
            "ring": report_channel.open_channel(feed.reporter(), feed, ring, train_op, tag),
            "no ring": report_channel.open_channel(feed.reporter(), feed, None, train_op, tag),
            "several steps": report_channel.open_channel(feed.reporter(), feed, ring, train_op, after_update),
            "no writes": report_channel.open_channel(feed.reporter(), feed, ring, tf.no_op(), tag),
        }
        gates = [op.type for op in tf.compat.v1.get_default_graph().get_operations()
                 if op.name.startswith(report_channel.GATE_NAME)]
    assert {name: type(c).__name__ for name, c in channels.items()} == {
        "ring": "RingChannel", "no ring": "AnsweredChannel", "several steps": "AnsweredChannel",
        "no writes": "UngatedChannel"}
    assert sorted(gates) == ["Identity", "PyFunc", "PyFunc"]  # the ring's gate runs no Python
    assert channels["no ring"].before_call(None) is None  # its gate gets the tags: nothing to fetch
    assert channels["several steps"].before_call(None) is after_update
    feed.stop()


def test_an_answered_channel_reports_what_its_gate_let_write_and_withdraws_a_taken_back_lease(service):
    feed = feed_of(service)
    batches = feed.batches(Numbers(10), batch_size=2)
    with tf.Graph().as_default():
        tag = tf.compat.v1.placeholder(tf.int64, [1, 4])
        global_step = tf.compat.v1.train.get_or_create_global_step()
        train_op = global_step.assign_add(1).op
        channel = report_channel.open_channel(feed.reporter(), feed, None, train_op, tag)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(2):
                channel.before_call(session)
                session.run(train_op, {tag: next(batches)[2][None]})
                channel.after_call(None)
            stale = next(batches)[2]
            chief = ShardClient.in_process(service, "chief-0")
            chief.commit(chief.seal(checkpoint_step=0), checkpoint_step=0)
            chief.restore(0)
            feed.client.heartbeat()
            channel.before_call(session)
            with pytest.raises(tf.errors.InvalidArgumentError) as withdrawn:
                session.run(train_op, {tag: stale[None]})
            assert training_step.is_withdrawn(withdrawn.value)
            channel.after_call(None)  # nothing passed the gate: nothing to report
            channel.close()
            assert session.run(global_step) == 2
    assert service.book.status("train")["trained_records"] == 4  # the two batches before the seal; not the third
    feed.stop()
    chief.close()

"""The restart budget that refills with progress (supervision.py): a crash loop still gives up after
`max_restarts`, as fast as a budget that never refills, while a job that makes progress between its faults survives
any number of them. Driven with a number for a clock and checkpoint events."""

from elastimator.cluster import supervision as sv
from tests.unit.test_supervision import POLICY, SYNC, SYNC_TASKS, TASKS, Job, kinds


def _restart_delays(job: Job) -> list[float]:
    return [d.fields["delay_secs"] for d in kinds(job.decisions, sv.Record) if d.event == "restart"]


def _group_up(job: Job, now: float) -> None:
    """The restarted group starts, listens and trains its first step."""
    job.at(now)
    job.up(now + 0.5)
    job.at(now + 1.0, *(sv.Stepped(n) for n in ("chief-0", "worker-0", "worker-1")))


def test_a_synchronous_group_with_a_checkpoint_between_its_faults_survives_more_than_max_restarts():
    job = Job(SYNC_TASKS, policy=SYNC).up()
    job.at(2.0, *(sv.Stepped(n) for n in ("chief-0", "worker-0", "worker-1")), sv.Checkpointed(40))
    delays = []
    for fault, (now, who) in enumerate([(10.0, "chief-0"), (20.0, "worker-0"), (30.0, "worker-1"),
                                        (40.0, "chief-0"), (50.0, "chief-0")]):
        job.at(now, sv.Exited(who, -9))
        assert not kinds(job.decisions, sv.End), job.said()
        delays += _restart_delays(job)
        _group_up(job, now + 1.0)
        job.at(now + 5.0, sv.Checkpointed(80 + 40 * fault))
        assert "restarts count from 0 again" in job.said()
        assert {c.strikes for c in job.state.children.values()} == {0}
    assert delays == [1.0] * 5  # the backoff starts over with the budget
    assert {n: c.restarts for n, c in job.state.children.items()} == {
        "chief-0": 5, "worker-0": 5, "worker-1": 5, "evaluator-0": 0}  # what the summary reports


def test_a_crash_loop_with_no_checkpoint_between_gives_up_as_fast_as_a_budget_that_never_refills():
    job = Job(SYNC_TASKS, policy=SYNC).up()
    job.at(2.0, *(sv.Stepped(n) for n in ("chief-0", "worker-0", "worker-1")), sv.Checkpointed(40))
    job.at(10.0, sv.Exited("chief-0", 1))
    _group_up(job, 11.0)
    job.at(13.0, sv.Checkpointed(40))  # the checkpoint it resumed from, seen again: no progress
    job.at(14.0, sv.Exited("worker-0", 1))
    assert "restart 2 of 2 without progress" in job.said() and _restart_delays(job) == [2.0]
    _group_up(job, 16.0)
    job.at(18.0, sv.Exited("chief-0", 1))
    assert kinds(job.decisions, sv.End) == [sv.End(1)]
    assert ("chief-0 exited with code 1, and the group of chief and workers was already started again 2 time(s) "
            "with no progress between them (not a checkpoint after step 40); giving up. See /m/logs/chief-0.log."
            in job.said())


def test_a_chief_that_dies_before_its_first_step_makes_no_progress_from_a_checkpoint_it_did_not_train():
    """A checkpoint the chief saves as it is stopped lands after the launcher decided to restart it; the restarted
    chief, crashing before it trains, must not count that checkpoint as its progress."""
    job = Job().up()
    job.at(2.0, sv.Stepped("chief-0"), sv.Checkpointed(40))
    for now in (10.0, 20.0):
        job.at(now, sv.Exited("chief-0", 1))
        job.at(now + 1.0, sv.Checkpointed(int(now) + 50))  # written while it was down: no restart refills
        job.at(now + 5.0)
        job.at(now + 6.0, sv.Listening("chief-0"))
    job.at(27.0, sv.Checkpointed(100))  # another trainer's progress, not the chief's: it never stepped
    job.at(30.0, sv.Exited("chief-0", 1))
    assert kinds(job.decisions, sv.End) == [sv.End(1)], job.said()


def test_a_worker_that_never_trains_leaves_its_slot_empty_while_the_others_make_checkpoints():
    job = Job().up()
    for now in (10.0, 20.0):
        job.at(now, sv.Exited("worker-0", 1))
        job.at(now + 5.0)
        job.at(now + 6.0, sv.Listening("worker-0"), sv.Checkpointed(int(now) * 10))
    job.at(30.0, sv.Exited("worker-0", 1))
    assert "worker-0 failed 3 times with no progress between them" in job.said()
    assert job.states()["worker-0"] is sv.State.FINISHED


def test_a_parameter_server_restarted_again_and_again_goes_on_while_training_checkpoints_between():
    job = Job().up()
    for fault in range(2 * POLICY.max_restarts + 1):
        now = 10.0 * (fault + 1)
        job.at(now, sv.Exited("ps-0", -9))
        assert _restart_delays(job) == [1.0], job.said()
        job.at(now + 1.0, sv.Checkpointed(int(now)))  # it is down: nothing refills yet
        assert job.state.children["ps-0"].strikes == 1
        job.at(now + 2.0)
        job.at(now + 3.0, sv.Listening("ps-0"))
        job.at(now + 6.0, sv.Checkpointed(int(now) + 5))
        assert job.state.children["ps-0"].strikes == 0
    assert job.state.children["ps-0"].restarts == 2 * POLICY.max_restarts + 1
    assert not kinds(job.decisions, sv.End)


def test_a_relaunch_counts_only_a_checkpoint_newer_than_the_one_it_found():
    state, _ = sv.begin(TASKS, 2, now=0.0, checkpoint_step=500)
    assert {c.resumed_from for c in state.children.values()} == {500} and state.checkpoint_step == 500
    policy = POLICY
    state, _ = sv.step(state, [sv.Listening(n) for n in ("ps-0", "chief-0", "worker-0", "worker-1")], 1.0, policy)
    for now in (10.0, 20.0):
        state, _ = sv.step(state, [sv.Exited("ps-0", 1)], now, policy)
        state, _ = sv.step(state, [], now + 5.0, policy)
        state, _ = sv.step(state, [sv.Listening("ps-0"), sv.Checkpointed(500)], now + 6.0, policy)
    state, decisions = sv.step(state, [sv.Exited("ps-0", 1)], 30.0, policy)
    assert kinds(decisions, sv.End) == [sv.End(1)]
    assert any("(not a checkpoint after step 500)" in d.text for d in kinds(decisions, sv.Say))

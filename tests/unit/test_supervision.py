"""The launcher's decisions, as a pure function: every supervision scenario with a number for a clock."""

import pytest

from elastimator.cluster import supervision as sv
from elastimator.cluster.plan import Task

POLICY = sv.Policy(max_restarts=2, backoff_secs=1.0, start_timeout_secs=60, finish_timeout_secs=30, worker_slots=3,
                   logs_dir="/m/logs")
TASKS = [Task("ps", 0), Task("chief"), Task("worker", 0), Task("worker", 1), Task("evaluator")]


class Job:
    """A job under `step`, with the decisions of its last turn."""

    def __init__(self, tasks=TASKS, workers=2, policy=POLICY):
        self.policy = policy
        self.state, self.decisions = sv.begin(tasks, workers, now=0.0)

    def at(self, now: float, *events) -> list:
        self.state, self.decisions = sv.step(self.state, list(events), now, self.policy)
        return self.decisions

    def up(self, now: float = 1.0) -> "Job":
        self.at(now, *(sv.Listening(n) for n, c in self.state.children.items() if c.state is sv.State.STARTING))
        return self

    def states(self) -> dict:
        return {name: child.state for name, child in self.state.children.items()}

    def said(self) -> str:
        return "\n".join(d.text for d in self.decisions if isinstance(d, sv.Say))


def kinds(decisions, kind):
    return [d for d in decisions if isinstance(d, kind)]


def test_every_task_starts_and_servers_come_up():
    job = Job()
    assert [d.task.name for d in job.decisions] == ["ps-0", "chief-0", "worker-0", "worker-1", "evaluator-0"]
    assert job.states()["evaluator-0"] is sv.State.RUNNING  # it serves nothing: nothing to wait for
    assert job.states()["chief-0"] is sv.State.STARTING
    job.up()
    assert set(job.states().values()) == {sv.State.RUNNING}
    assert [d.task for d in kinds(job.decisions, sv.Record)] == ["ps-0", "chief-0", "worker-0", "worker-1"]


def test_a_death_is_restarted_after_a_backoff_that_doubles():
    job = Job().up()
    job.at(10.0, sv.Exited("worker-1", -9))
    assert job.states()["worker-1"] is sv.State.RESTARTING
    assert "worker-1 exited with code -9; restarting it in 1.0s (restart 1 of 2 without progress)" in job.said()
    assert not kinds(job.at(10.9), sv.Start)
    assert kinds(job.at(11.0), sv.Start) == [sv.Start(Task("worker", 1), restart=1)]
    job.at(12.0, sv.Listening("worker-1"))
    job.at(20.0, sv.Exited("worker-1", 1))
    assert not kinds(job.at(21.9), sv.Start)
    assert kinds(job.at(22.0), sv.Start) == [sv.Start(Task("worker", 1), restart=2)]


def test_a_worker_out_of_restarts_leaves_its_slot_empty_and_the_job_goes_on():
    job = Job().up()
    for now in (10.0, 20.0):
        job.at(now, sv.Exited("worker-0", 1))
        job.at(now + 5)
    job.at(30.0, sv.Exited("worker-0", 1))
    assert ("worker-0 failed 3 times with no progress between them (not any checkpoint); leaving its slot empty"
            in job.said())
    assert job.states()["worker-0"] is sv.State.FINISHED
    assert not kinds(job.at(100.0), sv.Start) and not kinds(job.decisions, sv.End)


def test_a_parameter_server_out_of_restarts_ends_the_job():
    job = Job().up()
    for now in (10.0, 20.0):
        job.at(now, sv.Exited("ps-0", 1))
        job.at(now + 5)
    decisions = job.at(30.0, sv.Exited("ps-0", 1))
    assert kinds(decisions, sv.End) == [sv.End(1)]
    assert ("ps-0 exited with code 1 and was already restarted 2 time(s) with no progress between them (not any "
            "checkpoint); giving up. See /m/logs/ps-0.log.") in job.said()


@pytest.mark.parametrize("code, end, message", [
    (3, 1, "chief-0 failed in a way a restart would repeat, so the job ends here: Loss became nan at step 8 "
           "(log: /m/logs/chief-0.log)"),
    (2, 2, "usage error: chief-0 exited with code 2 (an invalid conf or bad arguments); not restarting it."),
])
def test_a_failure_that_would_repeat_is_not_retried(code, end, message):
    job = Job().up()
    decisions = job.at(5.0, sv.Exited("chief-0", code, last_error="Loss became nan at step 8"))
    assert kinds(decisions, sv.End) == [sv.End(end)]
    assert message in job.said()
    assert not [d for d in decisions if isinstance(d, sv.Record) and d.event == "restart"]


def test_a_chief_that_fails_after_the_parameter_servers_finished_ends_the_job():
    """A restarted chief waited up to two hours for parameter servers that had exited when training ended."""
    job = Job().up()
    job.at(50.0, sv.Exited("ps-0", 0))  # the chief said training is over
    decisions = job.at(51.0, sv.Exited("chief-0", 1))
    assert kinds(decisions, sv.End) == [sv.End(1)]
    assert "chief-0 exited with code 1 after training ended (the parameter servers had finished" in job.said()
    assert not kinds(job.at(60.0), sv.Start)


def test_a_server_that_never_listens_is_killed_and_named():
    job = Job()
    job.at(30.0, sv.Listening("chief-0"))
    assert not kinds(job.at(60.0), sv.End)
    decisions = job.at(60.5)
    assert sv.Kill(Task("ps", 0)) in decisions and kinds(decisions, sv.End) == [sv.End(1)]
    assert "ps-0 did not start: its server never listened within 60s. See /m/logs/ps-0.log." in job.said()


def test_a_worker_still_starting_when_the_chief_finishes_is_stopped_and_the_job_succeeds():
    job = Job(tasks=TASKS[:4]).up()
    job.at(10.0, sv.Exited("worker-1", -9))
    job.at(11.0)  # restarted: starting again
    decisions = job.at(12.0, sv.Exited("chief-0", 0))
    assert sv.Stop(Task("worker", 1), return_shards=False) in decisions
    assert "worker-1 was still starting when the chief finished" in job.said()
    decisions = job.at(13.0, sv.Exited("worker-0", 0))
    assert sv.Stop(Task("ps", 0), return_shards=False) in decisions and kinds(decisions, sv.End) == [sv.End(0)]


def test_nothing_restarts_once_the_chief_has_finished():
    job = Job().up()
    job.at(10.0, sv.Exited("chief-0", 0))
    job.at(11.0, sv.Exited("worker-0", -9))  # a worker killed at the end has nothing left to train
    assert job.states()["worker-0"] is sv.State.FINISHED
    job.at(12.0, sv.Exited("evaluator-0", 1))
    assert not kinds(job.at(50.0), sv.Start)


def test_an_evaluator_that_died_while_the_job_trained_still_starts_to_evaluate_the_final_checkpoint():
    """Killed moments before the chief finished, its restart pending: once a job that trained well failed for it."""
    job = Job().up()
    job.at(10.0, sv.Exited("evaluator-0", -9))  # restarts at 11.0
    job.at(10.5, sv.Exited("chief-0", 0), sv.Exited("worker-0", 0), sv.Exited("worker-1", 0))
    assert not kinds(job.decisions, sv.End)
    assert kinds(job.at(11.0), sv.Start) == [sv.Start(Task("evaluator"), restart=1)]
    assert kinds(job.at(20.0, sv.Exited("evaluator-0", 0)), sv.End) == [sv.End(0)]


def test_the_end_waits_for_the_evaluator_and_reports_its_failure():
    job = Job().up()
    job.at(10.0, sv.Exited("chief-0", 0), sv.Exited("worker-0", 0), sv.Exited("worker-1", 0))
    assert not kinds(job.at(39.0), sv.End)  # the evaluator is still evaluating the final checkpoint
    assert kinds(job.at(30.0, sv.Exited("evaluator-0", 0)), sv.End) == [sv.End(0)]

    late = Job().up()
    late.at(10.0, sv.Exited("chief-0", 0), sv.Exited("worker-0", 0), sv.Exited("worker-1", 0))
    decisions = late.at(40.5)
    assert sv.Stop(Task("evaluator"), return_shards=False) in decisions
    assert kinds(decisions, sv.End) == [sv.End(1)]
    assert "evaluator-0 has not finished 30s after the chief; stopping it" in late.said()


def test_scaling_up_starts_free_slots_and_scaling_down_stops_the_highest():
    job = Job().up()
    decisions = job.at(5.0, sv.ScaleTo(3))
    assert kinds(decisions, sv.Start) == [sv.Start(Task("worker", 2), restart=0)]
    assert "scaling to 3 worker(s) (from 2)" in job.said()
    decisions = job.at(6.0, sv.ScaleTo(1))
    assert kinds(decisions, sv.Stop) == [sv.Stop(Task("worker", 1), True), sv.Stop(Task("worker", 2), True)]
    assert job.state.target_workers == 1 and job.state.alive_workers() == 1
    decisions = job.at(7.0, sv.ScaleTo(2))  # a retired slot starts afresh, its restart count reset
    assert kinds(decisions, sv.Start) == [sv.Start(Task("worker", 1), restart=0)]


def test_scaling_down_cancels_a_pending_restart():
    job = Job().up()
    job.at(5.0, sv.Exited("worker-1", 1))
    decisions = job.at(5.5, sv.ScaleTo(1))
    assert not kinds(decisions, sv.Stop)  # nothing runs to stop
    assert job.states()["worker-1"] is sv.State.RETIRED
    assert not kinds(job.at(20.0), sv.Start)


def test_a_request_beyond_the_slots_is_refused_with_a_reason():
    job = Job().up()
    assert not kinds(job.at(5.0, sv.ScaleTo(7)), sv.Start)
    assert "ignoring a request for 7 worker(s): the job has 3 worker slot(s); asked for 7" in job.said()


@pytest.mark.parametrize("setup", ["starting", "running", "restarting", "chief finished", "scaled down"])
def test_a_stop_request_ends_the_job_with_130_in_every_state(setup):
    job = Job()
    if setup != "starting":
        job.up()
    if setup == "restarting":
        job.at(5.0, sv.Exited("worker-0", 1))
    elif setup == "chief finished":
        job.at(5.0, sv.Exited("chief-0", 0))
    elif setup == "scaled down":
        job.at(5.0, sv.ScaleTo(0))
    decisions = job.at(6.0, sv.Exited("worker-1", 1), sv.StopRequested())
    assert decisions == [sv.End(130)]


def test_an_autoscale_answer_scales_only_when_it_differs_from_the_target():
    job = Job().up()
    same = job.at(2.0, sv.Autoscaled(2, "steps/s flat"))
    assert kinds(same, sv.Record)[0].fields == {"workers": 2, "reason": "steps/s flat"}  # every answer recorded
    assert not kinds(same, sv.Start) and not kinds(same, sv.Stop) and job.said() == ""
    more = job.at(3.0, sv.Autoscaled(3, "steps/s rose with the last worker"))
    assert [d.task.name for d in kinds(more, sv.Start)] == ["worker-2"]
    assert "autoscale: steps/s rose with the last worker" in job.said() and job.state.target_workers == 3


def test_scale_requests_are_checked_by_one_rule():
    assert sv.scale_refused(3, 3) is None and sv.scale_refused(0, 3) is None
    for bad in (4, -1, True, "2"):
        assert sv.scale_refused(bad, 3) == f"the job has 3 worker slot(s); asked for {bad!r}"


def test_trainers_stop_before_the_parameter_servers_they_need():
    assert sv.stop_order(["ps-0", "chief", "worker-1", "ps-1", "evaluator"]) == [
        ["chief", "worker-1", "evaluator"], ["ps-0", "ps-1"]]
    assert sv.stop_order(["ps-0"]) == [["ps-0"]] and sv.stop_order([]) == []


# --- a synchronous job: the chief and workers as one group ------------------------------------------------------

SYNC = sv.Policy(max_restarts=2, backoff_secs=1.0, start_timeout_secs=60, finish_timeout_secs=30, worker_slots=3,
                 logs_dir="/m/logs", synchronous=True)
SYNC_TASKS = [Task("chief"), Task("worker", 0), Task("worker", 1), Task("evaluator")]


def test_a_stalled_trainer_restarts_the_whole_group_itself_included():
    """A frozen worker (SIGSTOP: its port still answers) held every other trainer in its all-reduce forever."""
    job = Job(SYNC_TASKS, policy=SYNC).up()
    job.at(40.0, sv.Stalled("worker-1", 31.0), sv.Stalled("chief-0", 31.0))
    assert [d.task.name for d in kinds(job.decisions, sv.Stop)] == ["chief-0", "worker-0", "worker-1"]
    assert "worker-1 made no training step for 31 s (a frozen process, or a peer it waits on); a synchronous " \
           "step needs every worker, so the chief and workers start again in 1.0s" in job.said()
    assert [d.fields for d in kinds(job.decisions, sv.Record) if d.event == "restart"] == [
        {"code": None, "delay_secs": 1.0, "group": True, "strikes": 1, "stalled": True}]
    assert {d.task.name for d in kinds(job.at(41.0), sv.Start)} == {"chief-0", "worker-0", "worker-1"}
    # A parameter-server job's trainers do not wait on each other: a slow one is no failure.
    ps_job = Job().up()
    assert not kinds(ps_job.at(40.0, sv.Stalled("worker-1", 31.0)), sv.Stop)


def test_a_dead_worker_restarts_the_whole_group_chief_first_and_leaves_the_evaluator():
    job = Job(SYNC_TASKS, policy=SYNC).up()
    job.at(10.0, sv.Exited("worker-1", -9))
    assert [d.task.name for d in kinds(job.decisions, sv.Stop)] == ["chief-0", "worker-0"]
    assert not any(d.return_shards for d in kinds(job.decisions, sv.Stop))  # the service restarts with the chief
    assert ("chief and workers start again in 1.0s from the newest checkpoint (restart 1 of 2 without progress)"
            in job.said())
    assert job.states() == {"chief-0": sv.State.RESTARTING, "worker-0": sv.State.RESTARTING,
                            "worker-1": sv.State.RESTARTING, "evaluator-0": sv.State.RUNNING}
    assert not kinds(job.at(10.9), sv.Start)
    assert {d.task.name: d.restart for d in kinds(job.at(11.0), sv.Start)} == \
        {"chief-0": 1, "worker-0": 1, "worker-1": 1}
    job.up(12.0)
    job.at(20.0, sv.Exited("chief-0", 1))  # the backoff doubles with the group's restarts
    assert "start again in 2.0s" in job.said()
    job.at(22.0)
    job.up(23.0)
    job.at(30.0, sv.Exited("worker-0", 1))
    assert kinds(job.decisions, sv.End) == [sv.End(1)]
    assert "already started again 2 time(s) with no progress between them" in job.said()


def test_a_killed_worker_is_the_cause_when_a_member_reacting_to_it_exits_in_the_same_turn():
    """worker-1 SIGKILLed; worker-0 lost its all-reduce and exited 1 before the launcher's next look."""
    job = Job(SYNC_TASKS, policy=SYNC).up()
    job.at(10.0, sv.Exited("worker-0", 1, "a worker of the all-reduce went away"), sv.Exited("worker-1", -9))
    assert [(d.task, d.fields["code"]) for d in kinds(job.decisions, sv.Record) if d.event == "restart"] == [
        ("worker-1", -9)]
    assert "worker-1 exited with code -9; a synchronous step needs every worker" in job.said()
    assert job.states() == {"chief-0": sv.State.RESTARTING, "worker-0": sv.State.RESTARTING,
                            "worker-1": sv.State.RESTARTING, "evaluator-0": sv.State.RUNNING}


def test_a_scale_stops_the_group_and_starts_it_again_with_the_new_workers_counting_no_restart():
    job = Job(SYNC_TASKS[:3], workers=2, policy=SYNC).up()
    job.at(10.0, sv.ScaleTo(3))
    assert [d.task.name for d in kinds(job.decisions, sv.Stop)] == ["chief-0", "worker-0", "worker-1"]
    assert job.state.target_workers == 3
    # Started again in the same turn, after the stops (the launcher carries a turn's decisions out in order).
    assert isinstance(job.decisions[-1], sv.Start)
    started = kinds(job.decisions, sv.Start)
    assert {d.task.name: d.restart for d in started} == {"chief-0": 0, "worker-0": 0, "worker-1": 0, "worker-2": 0}
    job.up(11.0)
    job.at(20.0, sv.ScaleTo(1))
    assert [d.task.name for d in kinds(job.decisions, sv.Stop)] == ["chief-0", "worker-0", "worker-1", "worker-2"]
    assert {d.task.name for d in kinds(job.decisions, sv.Start)} == {"chief-0", "worker-0"}
    assert job.states()["worker-2"] is sv.State.RETIRED and job.states()["worker-1"] is sv.State.RETIRED
    job.at(21.0, sv.ScaleTo(1))
    assert not kinds(job.decisions, sv.Stop)  # the group has that many already


def test_a_synchronous_stop_ends_the_chief_alone_first():
    assert sv.stop_order(["worker-0", "chief-0", "worker-1"], synchronous=True) == \
        [["chief-0"], ["worker-0", "worker-1"]]
    assert sv.stop_order(["worker-0", "chief-0", "ps-0"]) == [["worker-0", "chief-0"], ["ps-0"]]

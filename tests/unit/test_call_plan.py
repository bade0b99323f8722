"""The rules of what a call reuses and keeps (estimator/loops/call_plan.py), driven with plain facts: no graph, no
session. Each rule's "no" comes with the reason a user reads in the debug log."""

import dataclasses

import pytest

from elastimator.estimator.loops import call_plan
from elastimator.estimator.loops.call_plan import CallFacts, GraphFacts, KeptFacts

EVAL, PREDICT, TRAIN = "eval", "infer", "train"


@pytest.mark.parametrize("verb", [EVAL, PREDICT, TRAIN])
def test_a_plain_call_may_reuse_and_keep(verb):
    call = CallFacts(verb=verb, reuse_graphs=True)
    assert call_plan.consider(call)
    assert call_plan.reuse(KeptFacts(same_key=True, calls=1))
    assert call_plan.keep(verb, GraphFacts())


@pytest.mark.parametrize("facts, reason", [
    (dict(reuse_graphs=False), "reuse is off"),
    (dict(caller_hooks=True), "the caller passed hooks"),
    (dict(checkpoint=False), "no checkpoint to restore"),
    (dict(through_call_model_fn=True), "overridden _call_model_fn"),
])
def test_what_rules_out_an_evaluation_or_prediction_before_it_builds(facts, reason):
    for verb in (EVAL, PREDICT):
        decision = call_plan.consider(CallFacts(verb=verb, **{"reuse_graphs": True, **facts}))
        assert not decision and reason in decision.reason


def test_training_needs_a_local_chief_and_not_a_checkpoint_or_the_callers_hooks():
    assert call_plan.consider(CallFacts(verb=TRAIN, reuse_graphs=True, caller_hooks=True, checkpoint=False))
    decision = call_plan.consider(CallFacts(verb=TRAIN, reuse_graphs=True, local_chief=False))
    assert not decision and "local, single-process chief" in decision.reason
    assert not call_plan.consider(CallFacts(verb=TRAIN, reuse_graphs=False))


@pytest.mark.parametrize("kept, reason", [
    (None, "no graph is kept"),
    (KeptFacts(same_key=False, calls=1), "another model_fn, params, config"),
    (KeptFacts(same_key=True, calls=call_plan.MAX_CALLS), f"served {call_plan.MAX_CALLS} calls"),
    (KeptFacts(same_key=True, calls=2, usable=False), "freeing the kept graph's input failed"),
    (KeptFacts(same_key=True, calls=2, session_closed=True), "session was closed"),
])
def test_a_kept_graph_is_not_reused_when(kept, reason):
    decision = call_plan.reuse(kept)
    assert not decision and reason in decision.reason


def test_a_kept_graph_serves_up_to_max_calls():
    assert call_plan.reuse(KeptFacts(same_key=True, calls=call_plan.MAX_CALLS - 1))


@pytest.mark.parametrize("facts, reason", [
    (dict(remote_session=True), "master"),
    (dict(replicas=2), "2 replicas"),
    (dict(model_scaffold=True), "scaffold"),
    (dict(model_hooks=True), "hooks of its own"),
    (dict(plain_input=False), "not one dataset's iterator"),
    (dict(input_state=True), "table or variable"),
    (dict(seeded=True, draws_random_numbers=True), "draw random numbers"),
])
def test_what_a_built_graph_is_not_kept_for_in_every_verb(facts, reason):
    for verb in (EVAL, PREDICT, TRAIN):
        decision = call_plan.keep(verb, GraphFacts(**facts))
        assert not decision and reason in decision.reason, verb


def test_random_numbers_matter_only_under_a_seed():
    assert call_plan.keep(EVAL, GraphFacts(draws_random_numbers=True))
    assert call_plan.keep(TRAIN, GraphFacts(draws_random_numbers=True, random_input=True))


@pytest.mark.parametrize("facts, reason", [
    (dict(step_outputs=True), "step outputs"),
    (dict(evicting_embeddings=True), "evict"),
    (dict(variable_bytes=call_plan.MAX_KEPT_BYTES + 1), "bytes"),
    (dict(variable_bytes=float("inf")), "bytes"),
    (dict(seeded=True, random_input=True), "shuffles or samples"),
])
def test_what_only_a_training_graph_is_not_kept_for(facts, reason):
    decision = call_plan.keep(TRAIN, GraphFacts(**facts))
    assert not decision and reason in decision.reason
    assert call_plan.keep(EVAL, GraphFacts(**facts))  # evaluation and prediction keep graphs of that kind


def test_facts_and_decisions_are_values():
    decision = call_plan.keep(EVAL, GraphFacts())
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.yes = False
    assert GraphFacts(replicas=2) == GraphFacts(replicas=2)


PLAIN_INPUT = dict(dataset=True, same_spec=True)


@pytest.mark.parametrize("facts, reason, verbs", [
    (dict(dataset=False), "no tf.data.Dataset", (EVAL, PREDICT, TRAIN)),
    (dict(same_spec=False), "another element spec", (EVAL, PREDICT, TRAIN)),
    (dict(reads_state=True), "reads a table or variable", (EVAL, PREDICT, TRAIN)),
    (dict(makes_state=True), "made a table or variable", (TRAIN,)),
    (dict(random=True), "shuffles or samples", (TRAIN,)),
])
def test_what_keeps_a_calls_input_out_of_the_kept_graph(facts, reason, verbs):
    assert call_plan.reuse_input(TRAIN, call_plan.InputFacts(**PLAIN_INPUT))
    for verb in (EVAL, PREDICT, TRAIN):
        decision = call_plan.reuse_input(verb, call_plan.InputFacts(**{**PLAIN_INPUT, **facts}))
        assert bool(decision) is (verb not in verbs)
        if verb in verbs:
            assert reason in decision.reason


def steps(**facts):
    return call_plan.steps_fit(call_plan.StepFacts(**{"steps_per_execution": False, "kept_loop": False,
                                                       "session_kept": True, **facts}))


def test_a_config_that_sets_steps_per_execution_fits_whatever_the_call():
    assert steps(steps_per_execution=True, kept_loop=True, hook_needs_one_step="a LoggingTensorHook")
    assert steps(steps_per_execution=True, few_steps="5 steps")


def test_a_kept_loop_serves_short_calls_while_its_session_is_open_and_no_hook_needs_one_step():
    assert steps(kept_loop=True, few_steps="5 steps")
    decision = steps(kept_loop=True, few_steps="5 steps", session_kept=False)
    assert not decision and "optimized again in a new session" in decision.reason
    decision = steps(kept_loop=True, hook_needs_one_step="hook Counter runs per session call")
    assert not decision and "hook Counter" in decision.reason


def test_a_kept_single_step_graph_fits_only_where_a_new_graph_would_run_one_step_too():
    for reason in (dict(few_steps="5 steps"), dict(hook_needs_one_step="a hook"), dict(step_not_copyable="a cond")):
        decision = steps(**reason)
        assert decision and next(iter(reason.values())) in decision.reason
    decision = steps()
    assert not decision and "a new graph would run several" in decision.reason


def test_a_kept_training_graph_serves_only_if_the_hooks_begin_adds_no_state():
    assert call_plan.serve_after_begin(False)
    decision = call_plan.serve_after_begin(True)
    assert not decision and "kept saver lacks" in decision.reason


def test_a_kept_session_restores_unless_it_holds_that_checkpoint_unchanged():
    stamp = ("model.ckpt-10", 120, 5)
    assert not call_plan.restore(wanted=stamp, held=stamp, changed_since=False)
    assert call_plan.restore(wanted=stamp, held=("model.ckpt-10", 120, 6), changed_since=False)
    assert call_plan.restore(wanted=stamp, held=None, changed_since=False)
    decision = call_plan.restore(wanted=stamp, held=stamp, changed_since=True)
    assert decision and "may change the model's variables" in decision.reason

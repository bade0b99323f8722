"""Whether a call reuses a kept graph, and whether it keeps the graph it builds: pure decisions with reasons.

tf.estimator built a fresh graph and session for every call. A call here may
instead reuse what an earlier call of its verb kept (`warm_graphs`,
`kept_training`), where it would behave exactly as a fresh one. The rules live
here, as functions of facts the callers gather once:

- `CallFacts`, from the call's arguments and config, before any graph is built;
- `KeptFacts`, of the graph kept for the verb, if any;
- `GraphFacts`, of a graph the call just built, computed once it is built;
- `InputFacts`, of the call's input built in a kept graph, and `StepFacts`, of how a kept training graph steps.

Each rule returns a `Decision`: yes or no, and why, which the engine logs at
debug level (`logging.getLogger("elastimator").setLevel(logging.DEBUG)`). No
TensorFlow, no sessions: tests/unit/test_call_plan.py drives the rules with
plain values.

| decision | no, when |
|---|---|
| `consider`: may the call reuse or keep at all | reuse is off (`RunConfig(reuse_graphs=False)`); the caller passed hooks (eval, predict); there is no checkpoint to restore (eval, predict); the estimator builds its graphs through an overridden `_call_model_fn`; training that is not a local chief of one process without a strategy |
| `reuse`: may it take the kept graph | none is kept, or it was built from another model_fn, params, config or predict_keys; it served `MAX_CALLS` calls; a call failed in it; its session was closed |
| `reuse_input`: may the kept graph run this call's input | input_fn returned no dataset, or one of another element spec; its start reads a table or variable it made; (train) it made a table or variable, or (seeded) it shuffles or samples |
| `steps_fit`: does a kept training graph run as many steps per session call as a new one would (train) | it loops several steps, but a hook needs one step per call, or (its session closed) the call trains fewer steps than a loop pays back; it runs one step per call where a new graph would loop |
| `serve_after_begin`: may a kept training graph serve once the hooks have begun (train) | a hook's `begin` added a variable, table or resource, which the kept saver and initializers lack |
| `restore`: does a kept session restore the call's checkpoint | no, when it holds that checkpoint, unchanged (the same stamp), and nothing the calls run changed a model variable since |
| `keep`: may it keep the graph it built | a remote session or several replicas; the model's scaffold or hooks, or an input's own hooks; an input other than one dataset's iterator; an input that reads (eval, predict) or makes (train) a table or variable; with `tf_random_seed` set, random numbers drawn by what the calls run or (train) a shuffling input; (train) step outputs, embedding variables that evict at saves, over `MAX_KEPT_BYTES` of variables, or state the hooks' `begin` added |
"""

from __future__ import annotations

import dataclasses

MAX_CALLS = 64
"""Calls a kept graph serves before it is built afresh (each adds its input pipeline's ops)."""
MAX_KEPT_BYTES = 1 << 30
"""The most a kept training session may hold in variables (the model with its optimizer's slots). Past it, the
memory it would hold beside an evaluation's session between calls outweighs the build a next call saves."""
TRAIN = "train"
"""ModeKeys.TRAIN's value (this module imports nothing of TensorFlow's)."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """Yes or no, and why."""

    yes: bool
    reason: str

    def __bool__(self) -> bool:
        return self.yes


def _no(reason: str) -> Decision:
    return Decision(False, reason)


def _yes(reason: str) -> Decision:
    return Decision(True, reason)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CallFacts:
    """What a call's arguments and config say, before any graph is built."""

    verb: str
    """The mode: ModeKeys.TRAIN, EVAL or PREDICT."""
    reuse_graphs: bool
    """RunConfig.reuse_graphs."""
    caller_hooks: bool = False
    """The caller passed hooks (evaluation and prediction: a kept graph runs without a monitored session)."""
    checkpoint: bool = True
    """There is a checkpoint to restore (evaluation and prediction)."""
    through_call_model_fn: bool = False
    """The estimator builds its graphs through an overridden `_call_model_fn` (as AdaNet does), not its model_fn."""
    local_chief: bool = True
    """Training: a chief of a local, single-process job, with no master and no train_distribute strategy."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class KeptFacts:
    """The graph kept for a verb."""

    same_key: bool
    """Built from the same model_fn, equal params, the same RunConfig object and the call's own key."""
    calls: int
    """The calls it has served."""
    usable: bool = True
    """False once freeing its input failed."""
    session_closed: bool = False
    """Its session was closed (by the garbage collector's finalizer) behind the engine's back."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GraphFacts:
    """What a graph a call just built is, computed once it is built."""

    remote_session: bool = False
    """Its session would run at a master (a cluster's), not in this process."""
    replicas: int = 1
    model_scaffold: bool = False
    """The model's spec has a scaffold of its own."""
    model_hooks: bool = False
    """The model's spec (or, evaluation and prediction, an input) has hooks of its own."""
    plain_input: bool = True
    """The input is one dataset's iterator, started by its hook alone."""
    input_state: bool = False
    """The input reads (evaluation, prediction) or makes (training) a table or variable: the next call's input_fn
    would make another, which nothing initializes."""
    seeded: bool = False
    """RunConfig.tf_random_seed is set: a fresh graph draws the same random numbers every call."""
    draws_random_numbers: bool = False
    """What the calls run draws random numbers (a stateful random op, in the graph or a function it calls)."""
    random_input: bool = False
    """Training: the input shuffles or samples (its seeds come from the graph's op count under a graph seed)."""
    step_outputs: bool = False
    """Training: the input or the model declared step outputs."""
    evicting_embeddings: bool = False
    """Training: embedding variables evict at saves (listeners a kept graph would not run again)."""
    variable_bytes: float = 0.0
    """Training: what the variables hold (infinite where a shape is not static)."""
    hooks_added_state: bool = False
    """Training: the hooks' `begin` added a variable, table or resource (a kept session would lack the next call's)."""


def consider(call: CallFacts) -> Decision:
    """Whether the call may reuse or keep a graph at all."""
    if not call.reuse_graphs:
        return _no("reuse is off (RunConfig(reuse_graphs=False))")
    if call.through_call_model_fn:
        return _no("the estimator builds its graphs through an overridden _call_model_fn")
    if call.verb == TRAIN:
        if not call.local_chief:
            return _no("training that is not a local, single-process chief without a strategy")
        return _yes("a local chief's training")
    if call.caller_hooks:
        return _no("the caller passed hooks")
    if not call.checkpoint:
        return _no("there is no checkpoint to restore")
    return _yes("no hooks, and a checkpoint to restore")


def reuse(kept: KeptFacts | None) -> Decision:
    """Whether the call may take the graph kept for its verb."""
    if kept is None:
        return _no("no graph is kept for this verb (or another call is using it)")
    if not kept.same_key:
        return _no("the kept graph was built from another model_fn, params, config or predict_keys")
    if kept.calls >= MAX_CALLS:
        return _no(f"the kept graph served {kept.calls} calls, the most it serves")
    if not kept.usable:
        return _no("freeing the kept graph's input failed")
    if kept.session_closed:
        return _no("the kept graph's session was closed")
    return _yes("the kept graph was built from the same model, params and config")


def keep(verb: str, graph: GraphFacts) -> Decision:
    """Whether the call may keep the graph it built for the next call of its verb."""
    if graph.remote_session:
        return _no("its session runs at a master")
    if graph.replicas > 1:
        return _no(f"it runs {graph.replicas} replicas")
    if graph.model_scaffold:
        return _no("the model's spec has a scaffold of its own")
    if graph.model_hooks:
        return _no("the model or its input has hooks of its own")
    if not graph.plain_input:
        return _no("its input is not one dataset's iterator")
    if graph.input_state:
        return _no("its input makes or reads a table or variable, which the next call's input_fn would make anew")
    if graph.seeded and graph.draws_random_numbers:
        return _no("tf_random_seed is set and the calls draw random numbers (a fresh graph draws the same ones)")
    if verb == TRAIN:
        if graph.step_outputs:
            return _no("its input or model declares step outputs")
        if graph.evicting_embeddings:
            return _no("embedding variables evict at saves")
        if graph.variable_bytes > MAX_KEPT_BYTES:
            return _no(f"its variables hold {graph.variable_bytes:.3g} bytes, over {MAX_KEPT_BYTES}")
        if graph.seeded and graph.random_input:
            return _no("tf_random_seed is set and its input shuffles or samples")
        if graph.hooks_added_state:
            return _no("the hooks' begin added variables, tables or resources")
    return _yes("a later call would behave as a fresh graph's")


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputFacts:
    """A call's input, built in the kept graph it is to run in."""

    dataset: bool
    """input_fn returned a tf.data.Dataset."""
    same_spec: bool
    """It yields exactly what the kept iterator yields (its `element_spec`)."""
    reads_state: bool = False
    """Starting the iterator on it reads a table or variable (the one its input_fn made, which nothing would
    initialize)."""
    makes_state: bool = False
    """Training: the input_fn added a variable, table or resource to the graph."""
    random: bool = False
    """Training: tf_random_seed is set and the input shuffles or samples."""


def reuse_input(verb: str, facts: InputFacts) -> Decision:
    """Whether the kept graph may run the call's input (else the call builds afresh)."""
    if not facts.dataset:
        return _no("input_fn returned no tf.data.Dataset")
    if not facts.same_spec:
        return _no("the input yields another element spec than the kept iterator")
    if facts.reads_state:
        return _no("the input reads a table or variable its input_fn made")
    if verb == TRAIN:
        if facts.makes_state:
            return _no("the input_fn made a table or variable")
        if facts.random:
            return _no("tf_random_seed is set and the input shuffles or samples")
    return _yes("the input yields what the kept iterator yields")


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepFacts:
    """How a train call would step in a new graph, and how the kept training graph steps."""

    steps_per_execution: bool
    """RunConfig.steps_per_execution is set: graphs are built for it, kept or new."""
    kept_loop: bool
    """The kept graph runs several steps per session call (a loop of steps)."""
    session_kept: bool
    """The kept graph's session is open (its loop already optimized), not closed while another verb ran."""
    hook_needs_one_step: str | None = None
    """Why one of the call's hooks needs one step per session call, or None."""
    few_steps: str | None = None
    """Why the call trains too few steps to pay back a loop, or None."""
    step_not_copyable: str | None = None
    """Why the step cannot be copied into a loop, or None."""


def steps_fit(facts: StepFacts) -> Decision:
    """Whether the kept training graph runs as many steps per session call as a graph built for the call would."""
    if facts.steps_per_execution:
        return _yes("it was built for RunConfig.steps_per_execution, as a new graph would be")
    if facts.kept_loop:
        if facts.hook_needs_one_step is not None:
            return _no(f"it runs several steps per session call, but {facts.hook_needs_one_step}")
        if facts.few_steps is not None and not facts.session_kept:
            return _no(f"its loop of steps would be optimized again in a new session, and {facts.few_steps}")
        return _yes("its loop of steps serves this call")
    reason = facts.few_steps or facts.hook_needs_one_step or facts.step_not_copyable
    if reason is not None:
        return _yes(f"it runs one step per session call, as a new graph would: {reason}")
    return _no("it runs one step per session call, where a new graph would run several")


def serve_after_begin(state_grew: bool) -> Decision:
    """Whether a kept training graph may serve the call once its hooks have begun."""
    if state_grew:
        return _no("the hooks' begin added variables, tables or resources, which the kept saver lacks")
    return _yes("the hooks' begin added no state")


def restore(*, wanted: tuple, held: tuple | None, changed_since: bool) -> Decision:
    """Whether a kept session restores the call's checkpoint (`wanted`, a `CheckpointDir.stamp`), given the one it
    `held` (None: none known) and whether what its calls ran `changed_since` a model variable."""
    if changed_since:
        return _yes("the calls it ran may change the model's variables")
    if held is None:
        return _yes("the session holds no checkpoint known to be whole")
    if held != wanted:
        return _yes("the session holds another checkpoint, or this one written anew")
    return _no("the session holds this checkpoint, unchanged")

"""Training embedding variables with the v1 optimizers users have: sparse updates of the rows a step read.

A v1 optimizer computes the gradient of a training lookup's distinct rows like any other
(`lookup.py` registers those rows as trainable). While the Estimator engine builds a model_fn,
`sparse_updates()` has `Optimizer.apply_gradients` hand such gradients to the rule below for the
optimizer's class, which reads the rows and slots of just those ids, updates them and writes them
back; every other gradient goes to the optimizer as before, and the global step is incremented
once, after all of them.

The rules are TensorFlow's own kernels' arithmetic applied to the step's rows only:

* GradientDescent: row -= lr * g.
* Adagrad: acc += g^2; row -= lr * g / sqrt(acc) (acc starts at initial_accumulator_value).
* Adam, lazily: only the step's rows' m and v decay and move (v1 Adam decays every row of a dense
  table each step, which would make each step as slow as the table is large); bias correction uses
  the global step.
* Ftrl, with l1, l2, l2 shrinkage, beta and any learning_rate_power.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from elastimator._context_patch import ContextPatch
from elastimator.embedding.lookup import TrainedLookup, trained_lookup
from elastimator.errors import ModelFnError

_V1 = tf.compat.v1.train


def _float(optimizer, value) -> tf.Tensor:
    return tf.cast(optimizer._call_if_callable(value), tf.float32)  # pylint: disable=protected-access


class _Rule:
    """One optimizer's update of rows: `slots` (name -> initial value) and `apply`, built once per
    `apply_gradients` call (its hyperparameter tensors serve every embedding variable)."""

    slots: dict[str, float] = {}
    name = ""
    """The slot tables' prefix: the optimizer class without "Optimizer" ("Adam")."""

    def apply(self, rows, slots: dict, grad):
        raise NotImplementedError


class _Sgd(_Rule):
    def __init__(self, optimizer):
        self.lr = _float(optimizer, optimizer._learning_rate)  # pylint: disable=protected-access
        self.slots = {}

    def apply(self, rows, slots, grad):
        return rows - self.lr * grad, {}


class _Adagrad(_Rule):
    def __init__(self, optimizer):
        self.lr = _float(optimizer, optimizer._learning_rate)  # pylint: disable=protected-access
        self.slots = {"accumulator": float(optimizer._initial_accumulator_value)}  # pylint: disable=protected-access

    def apply(self, rows, slots, grad):
        accumulator = slots["accumulator"] + grad * grad
        return rows - self.lr * grad * tf.math.rsqrt(accumulator), {"accumulator": accumulator}


class _Adam(_Rule):
    def __init__(self, optimizer):
        lr = _float(optimizer, optimizer._lr)  # pylint: disable=protected-access
        self.beta1 = _float(optimizer, optimizer._beta1)  # pylint: disable=protected-access
        self.beta2 = _float(optimizer, optimizer._beta2)  # pylint: disable=protected-access
        self.epsilon = _float(optimizer, optimizer._epsilon)  # pylint: disable=protected-access
        t = tf.cast(tf.compat.v1.train.get_or_create_global_step(), tf.float32) + 1.0
        self.lr = lr * tf.sqrt(1.0 - tf.pow(self.beta2, t)) / (1.0 - tf.pow(self.beta1, t))
        self.slots = {"m": 0.0, "v": 0.0}

    def apply(self, rows, slots, grad):
        m = self.beta1 * slots["m"] + (1.0 - self.beta1) * grad
        v = self.beta2 * slots["v"] + (1.0 - self.beta2) * grad * grad
        return rows - self.lr * m / (tf.sqrt(v) + self.epsilon), {"m": m, "v": v}


class _Ftrl(_Rule):
    def __init__(self, optimizer):
        o = optimizer
        self.lr = _float(o, o._learning_rate)  # pylint: disable=protected-access
        self.power = float(o._learning_rate_power)  # pylint: disable=protected-access
        self.l1 = _float(o, o._l1_regularization_strength)  # pylint: disable=protected-access
        beta = _float(o, getattr(o, "_beta", 0.0) or 0.0)
        self.l2 = _float(o, o._l2_regularization_strength) + beta / (2.0 * self.lr)  # pylint: disable=protected-access
        self.shrinkage = _float(o, o._l2_shrinkage_regularization_strength)  # pylint: disable=protected-access
        self.slots = {"accum": float(o._initial_accumulator_value), "linear": 0.0}  # pylint: disable=protected-access

    def apply(self, rows, slots, grad):
        accum = slots["accum"] + grad * grad
        shrunk = grad + 2.0 * self.shrinkage * rows
        sigma = (tf.pow(accum, -self.power) - tf.pow(slots["accum"], -self.power)) / self.lr
        linear = slots["linear"] + shrunk - sigma * rows
        quadratic = tf.pow(accum, -self.power) / self.lr + 2.0 * self.l2
        new_rows = tf.where(tf.abs(linear) > self.l1, (tf.sign(linear) * self.l1 - linear) / quadratic,
                            tf.zeros_like(linear))
        return new_rows, {"accum": accum, "linear": linear}


_RULES = ((_V1.AdamOptimizer, _Adam), (_V1.AdagradOptimizer, _Adagrad), (_V1.FtrlOptimizer, _Ftrl),
          (_V1.GradientDescentOptimizer, _Sgd))


def _rule_for(optimizer) -> _Rule:
    for kind, rule in _RULES:
        if isinstance(optimizer, kind):
            built = rule(optimizer)
            built.name = type(optimizer).__name__.replace("Optimizer", "")
            return built
    raise ModelFnError(
        f"Embedding variables are trained by tf.compat.v1.train's AdamOptimizer, AdagradOptimizer, FtrlOptimizer "
        f"and GradientDescentOptimizer (sparse updates of the rows a step read); got {type(optimizer).__name__}. "
        "Use one of those for the model_fn's optimizer.")


def _dense(grad, count) -> tf.Tensor:
    if isinstance(grad, tf.IndexedSlices):
        return tf.math.unsorted_segment_sum(grad.values, grad.indices, count)
    return tf.convert_to_tensor(grad)


def apply_rows(rule: _Rule, grad, lookup: TrainedLookup) -> tf.Operation:
    """Applies `grad` (of the lookup's distinct rows) to the variable's tables by `rule`."""
    variable = lookup.variable
    keys = lookup.keys
    grad = _dense(grad, tf.size(keys, out_type=tf.int64))
    if lookup.admitted is not None:  # ids a filter has not admitted have no row to update
        keys, grad = tf.boolean_mask(keys, lookup.admitted), tf.boolean_mask(grad, lookup.admitted)
    writes = []
    for part, part_keys, part_grad in variable.split(keys, grad)[1]:
        tables = {slot: variable.slot(part, f"{rule.name}/{slot}", initial) for slot, initial in rule.slots.items()}
        with part.placed():
            rows = part.ids.lookup(part_keys)
            # An id evicted while this step ran starts again from its initial row.
            rows = tf.where(tf.math.is_nan(rows[:, :1]), variable.initial_rows(part_keys), rows)
            new_rows, new_slots = rule.apply(rows, {s: t.lookup(part_keys) for s, t in tables.items()}, part_grad)
            writes.append(part.ids.insert(part_keys, new_rows))
            writes.extend(tables[s].insert(part_keys, value) for s, value in new_slots.items())
    return tf.group(*writes, name=f"{variable.name.replace('/', '_')}_update")


def _apply_gradients(optimizer, grads_and_vars, global_step=None, name=None, **kwargs):
    """`Optimizer.apply_gradients`, with embedding rows updated by `apply_rows` (see the module doc)."""
    pairs = [(grad, v, trained_lookup(v)) for grad, v in grads_and_vars]
    ours = [(grad, lookup) for grad, _, lookup in pairs if lookup is not None]
    rest = [(grad, v) for grad, v, lookup in pairs if lookup is None]
    original = _PATCH.original
    if not ours:
        return original(optimizer, rest, global_step=global_step, name=name, **kwargs)
    with tf.name_scope(name or f"{optimizer.get_name()}_embedding"):
        rule = _rule_for(optimizer)
        updates = [apply_rows(rule, grad, lookup) for grad, lookup in ours if grad is not None]
    with tf.control_dependencies(updates):
        if any(grad is not None for grad, _ in rest):
            return original(optimizer, rest, global_step=global_step, name=name, **kwargs)
        if global_step is None:
            return tf.group(*updates)
        return tf.compat.v1.assign_add(global_step, 1, name=name or optimizer.get_name()).op


_PATCH = ContextPatch(_V1.Optimizer, "apply_gradients", _apply_gradients)


@contextlib.contextmanager
def sparse_updates() -> Iterator[None]:
    """While open, v1 optimizers apply embedding rows' gradients with `apply_rows` (see the module doc)."""
    with _PATCH.applied():
        yield

"""`CannedEstimator`: an Estimator whose model_fn is logits from feature columns plus a head.

Each canned estimator says which feature columns it reads, how it computes logits,
and which optimizer trains which variable scope (wide & deep trains its linear part
with FTRL and its deep part with Adagrad, each over its own variables).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, Sequence

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator import Estimator, ModeKeys
from elastimator.premade.classification import BinaryClassHead, MultiClassHead
from elastimator.premade.features import check_features
from elastimator.premade.head import Head
from elastimator import optimizers
from elastimator.premade.regression import RegressionHead


@dataclasses.dataclass(frozen=True)
class Part:
    """One variable scope of a canned model and the optimizer that trains it."""

    scope: str | None
    """Variable scope whose trainable variables this optimizer updates; None: every trainable variable."""
    optimizer: Any
    """A name from `OPTIMIZERS`, an optimizer object, or a callable returning one (elastimator.optimizers)."""
    learning_rate: float
    """Learning rate when `optimizer` is a name."""


def scope_path(within: str, scope: str | None) -> str:
    """The full name of variable scope `scope` opened inside scope `within` ('' is the graph's root)."""
    return "/".join(name for name in (within, scope) if name)


def trainable_under(scope: str) -> list:
    """The trainable variables under variable scope `scope` (its full name; '' is every one).

    A model's own variables are those under the scope it opened, wherever the model_fn was called from: a
    framework may call it inside scopes of its own (AdaNet's AutoEnsembleEstimator calls each candidate's
    model_fn in a template), as tf.estimator 2.15's canned estimators trained their model's variables then.
    """
    variables = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    return [v for v in variables if not scope or v.op.name.startswith(scope + "/")]


def classification_head(n_classes: int, weight_column, label_vocabulary, loss_reduction) -> Head:
    """Binary head for 2 classes, multi-class above; the canned classifiers' choice."""
    if not isinstance(n_classes, int) or n_classes < 2:
        raise ConfigError(f"n_classes must be an int >= 2; got {n_classes!r}.")
    if n_classes == 2:
        return BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary,
                               loss_reduction=loss_reduction)
    return MultiClassHead(n_classes, weight_column=weight_column, label_vocabulary=label_vocabulary,
                          loss_reduction=loss_reduction)


def regression_head(label_dimension: int, weight_column, loss_reduction) -> Head:
    return RegressionHead(label_dimension=label_dimension, weight_column=weight_column, loss_reduction=loss_reduction)


class CannedEstimator(Estimator, abc.ABC):
    """Base of the canned estimators: check features, compute logits, let the head do the rest."""

    def __init__(self, head: Head, parts: Sequence[Part], *, model_dir=None, config=None, warm_start_from=None):
        if not isinstance(head, Head):
            raise ConfigError(f"{type(self).__name__}: head must be an elastimator Head; got {type(head).__name__}.")
        self._head = head
        # Keras optimizer objects become per-graph factories here, while eager, as tf.estimator 2.15 converted them.
        self._parts = tuple(dataclasses.replace(p, optimizer=optimizers.prepare(p.optimizer)) for p in parts)
        super().__init__(model_fn=self._canned_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)

    @property
    def head(self) -> Head:
        return self._head

    @abc.abstractmethod
    def _feature_columns(self) -> tuple:
        """Every feature column the model reads (to check the features against)."""

    @abc.abstractmethod
    def _logits(self, features: dict, training: bool) -> tf.Tensor:
        """[batch, head.logits_dimension] logits, variables created under the parts' scopes.

        `features` is this call's own dict of the checked features: a model may add what it derives for the
        head (the RNNs add their sequence mask).
        """

    def _canned_model_fn(self, features, labels, mode, config):
        del config  # The engine reads the RunConfig itself.
        features = check_features(features, self._feature_columns(), type(self).__name__)
        logits = self._logits(features, training=mode == ModeKeys.TRAIN)
        regularization = tf.compat.v1.losses.get_regularization_losses()
        return self._head.create_estimator_spec(features, mode, logits, labels,
                                                train_op_fn=self._train_op_fn(features, labels),
                                                regularization_losses=regularization or None)

    def _train_op_fn(self, features: dict, labels) -> Callable[[tf.Tensor], tf.Operation]:
        """The head's `train_op_fn`: the parts' optimizers minimizing the loss (a model whose solver reads the
        batch itself, as SDCA does, builds its train op from `features` and `labels` instead)."""
        del features, labels
        within = tf.compat.v1.get_variable_scope().name  # the scope the model's own variables are under
        return lambda loss: self._train_op(loss, within)

    def _train_op(self, loss: tf.Tensor, within: str) -> tf.Operation:
        global_step = tf.compat.v1.train.get_global_step()
        steps, counted = [], False
        for part in self._parts:
            variables = trainable_under(scope_path(within, part.scope))
            if variables:
                optimizer = optimizers.get_optimizer_instance(part.optimizer, part.learning_rate)
                # A Keras optimizer counts steps in its `iterations`: the first one counts the global step.
                counts = not counted and not isinstance(optimizer, tf.compat.v1.train.Optimizer)
                steps.append(optimizers.minimize(optimizer, loss, variables, global_step if counts else None))
                counted = counted or counts
        if not steps:
            raise ConfigError(f"{type(self).__name__}: the model has no trainable variables under "
                              f"{[scope_path(within, p.scope) for p in self._parts]}.")
        if counted:
            return tf.group(*steps)
        with tf.control_dependencies(steps):
            return tf.compat.v1.assign_add(global_step, 1).op

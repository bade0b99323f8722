"""`MultiHead`: several named heads over one model, for multi-task learning, as tf.estimator 2.15 merged them.

* logits and labels are dicts keyed by head name (logits may also be one tensor, split along its last
  dimension in head order);
* the training loss is the weighted sum of the heads' losses;
* evaluation reports every head's metrics (suffixed with its name, as a named head suffixes them) and each
  head's `loss/<name>`;
* predictions are keyed `(head name, prediction key)`;
* export outputs: the first head's default signature serves `serving_default`; each head's signatures are
  there as `<name>` (its default) and `<name>/<key>`; `predict` holds every head's predictions as
  `<name>/<key>`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf

from elastimator.errors import ConfigError, HeadError
from elastimator.estimator import EstimatorSpec, ModeKeys
from elastimator.export.outputs import PredictOutput
from elastimator.premade import head_metrics
from elastimator.premade.head import Head, _train_op
from elastimator.premade.keys import MetricKeys, SignatureKeys


class MultiHead(Head):
    """Merges named heads: summed (weighted) losses, every head's metrics and predictions.

    Args:
        heads: `Head`s, each with a `name`; the first is the one served by default.
        head_weights: A weight per head for the training loss (default: all 1).

    Example:
        >>> head = MultiHead([MultiClassHead(3, name="topic"), BinaryClassHead(name="click")])
        >>> spec = head.create_estimator_spec(features, mode, {"topic": logits1, "click": logits2},
        ...                                   labels, optimizer=optimizer)
    """

    def __init__(self, heads: Sequence[Head], head_weights: Sequence[float] | None = None):
        heads = tuple(heads or ())
        if not heads:
            raise ConfigError("MultiHead: heads must be a non-empty list of Heads.")
        for head in heads:
            if not isinstance(head, Head):
                raise ConfigError(f"MultiHead: heads must be Heads; got {type(head).__name__}.")
            if not head.name:
                raise ConfigError(f"MultiHead: every head needs a name (its metrics and predictions are keyed by "
                                  f"it); {type(head).__name__} has none. Pass name='...'.")
        names = [head.name for head in heads]
        if len(set(names)) != len(names):
            raise ConfigError(f"MultiHead: head names must differ; got {names}.")
        if head_weights is not None and len(head_weights) != len(heads):
            raise ConfigError(f"MultiHead: heads and head_weights must have the same size; got {len(heads)} heads "
                              f"and {len(head_weights)} weights.")
        super().__init__(name="_".join(names), loss_reduction=heads[0].loss_reduction)
        self._heads = heads
        self._head_weights = tuple(head_weights) if head_weights is not None else None

    @property
    def heads(self) -> tuple[Head, ...]:
        return self._heads

    @property
    def logits_dimension(self) -> int:
        return sum(head.logits_dimension for head in self._heads)

    # --- per head -----------------------------------------------------------------------------

    def _split_logits(self, logits) -> dict:
        if isinstance(logits, Mapping):
            missing = sorted({h.name for h in self._heads} - set(logits))
            if missing:
                raise HeadError(f"MultiHead: logits has no entry for head(s) {missing}; got keys {sorted(logits)}.")
            return {head.name: logits[head.name] for head in self._heads}
        logits = tf.convert_to_tensor(logits)
        parts = tf.split(logits, [head.logits_dimension for head in self._heads], axis=-1)
        return {head.name: part for head, part in zip(self._heads, parts)}

    def _split_labels(self, labels) -> dict:
        if not isinstance(labels, Mapping):
            raise HeadError(f"MultiHead: labels must be a dict keyed by head name {[h.name for h in self._heads]}; "
                            f"got {type(labels).__name__}. Return {{head_name: labels}} from input_fn.")
        missing = sorted({h.name for h in self._heads} - set(labels))
        if missing:
            raise HeadError(f"MultiHead: labels has no entry for head(s) {missing}; got keys {sorted(labels)}.")
        return {head.name: labels[head.name] for head in self._heads}

    def _weighted(self, losses: Sequence[tf.Tensor]) -> tf.Tensor:
        if self._head_weights is None:
            return tf.add_n(list(losses))
        return tf.add_n([loss * weight for loss, weight in zip(losses, self._head_weights)])

    # --- the Head interface ----------------------------------------------------------------------

    def predictions(self, logits, keys=None):
        """Every head's predictions, keyed (head name, prediction key); `keys` picks prediction keys."""
        split = self._split_logits(logits)
        return {(head.name, key): value for head in self._heads
                for key, value in head.predictions(split[head.name], keys).items()}

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        split_logits, split_labels = self._split_logits(logits), self._split_labels(labels)
        loss = self._weighted([head.loss(split_labels[head.name], split_logits[head.name], features, mode)
                               for head in self._heads])
        if regularization_losses:
            loss = loss + tf.add_n(list(regularization_losses))
        return loss

    def metrics(self, regularization_losses=None) -> dict:
        """Each head's `loss/<name>` mean; `update_metrics` adds the heads' own metrics to the dict."""
        metrics = {f"{MetricKeys.LOSS}/{head.name}": head_metrics.mean(f"{MetricKeys.LOSS}/{head.name}")
                   for head in self._heads}
        if regularization_losses is not None:
            metrics[MetricKeys.LOSS_REGULARIZATION] = head_metrics.mean(MetricKeys.LOSS_REGULARIZATION)
        return metrics

    def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None):
        split_logits, split_labels = self._split_logits(logits), self._split_labels(labels)
        for head in self._heads:
            head_logits, head_labels = split_logits[head.name], split_labels[head.name]
            eval_metrics[f"{MetricKeys.LOSS}/{head.name}"].update_state(
                head.loss(head_labels, head_logits, features))
            own = {key: metric for key, metric in eval_metrics.items() if key.endswith(f"/{head.name}")
                   and key != f"{MetricKeys.LOSS}/{head.name}"}
            own = own or head.metrics()
            eval_metrics.update(head.update_metrics(own, features, head_logits, head_labels))
        if regularization_losses is not None:
            eval_metrics[MetricKeys.LOSS_REGULARIZATION].update_state(tf.add_n(list(regularization_losses)))
        return eval_metrics

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        """The merged `EstimatorSpec` for `mode` (see the module doc for how each part is merged)."""
        split_logits = self._split_logits(logits)
        split_labels = self._split_labels(labels) if mode != ModeKeys.PREDICT else {}
        specs = [head.create_estimator_spec(features, mode, split_logits[head.name], split_labels.get(head.name),
                                            train_op_fn=lambda loss: tf.no_op())
                 for head in self._heads]
        predictions = {(head.name, key): value for head, spec in zip(self._heads, specs)
                       for key, value in spec.predictions.items()}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self._export_outputs(specs))
        loss = self._weighted([spec.loss for spec in specs])
        if regularization_losses:
            loss = loss + tf.add_n(list(regularization_losses))
        if mode == ModeKeys.EVAL:
            metrics = {}
            for head, spec in zip(self._heads, specs):
                metrics.update(spec.eval_metric_ops)
                metrics[f"{MetricKeys.LOSS}/{head.name}"] = tf.compat.v1.metrics.mean(spec.loss)
            if regularization_losses:
                metrics[MetricKeys.LOSS_REGULARIZATION] = tf.compat.v1.metrics.mean(
                    tf.add_n(list(regularization_losses)))
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=metrics)
        for head, spec in zip(self._heads, specs):
            tf.compat.v1.summary.scalar(f"{MetricKeys.LOSS}/{head.name}", spec.loss)
        train_op = _train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    def _export_outputs(self, specs) -> dict:
        outputs = {SignatureKeys.SERVING_DEFAULT: specs[0].export_outputs[SignatureKeys.SERVING_DEFAULT]}
        merged_predict = {}
        for head, spec in zip(self._heads, specs):
            for key, output in spec.export_outputs.items():
                outputs[head.name if key == SignatureKeys.SERVING_DEFAULT else f"{head.name}/{key}"] = output
                if key == SignatureKeys.PREDICT and isinstance(output, PredictOutput):
                    merged_predict.update({f"{head.name}/{k}": v for k, v in output.outputs.items()})
        outputs[SignatureKeys.PREDICT] = PredictOutput(merged_predict)
        return outputs

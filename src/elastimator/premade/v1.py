"""The canned estimators as `tf.compat.v1.estimator` had them: losses summed over the batch, and partitioners.

tf.estimator's v1 canned estimators (`tf.compat.v1.estimator.DNNClassifier`, ...)
defaulted to `loss_reduction=SUM`, where the TF2 ones (`tf.estimator.*`) average
over the batch; their optimizers, learning rates and layers were the same. A
migrated v1 program keeps its loss scale, and so its effective learning rate,
only with the v1 default. They also took variable partitioners
(`input_layer_partitioner`, `partitioner`), which split a big input layer (an
embedding) into parts that a parameter-server job spreads over its servers; they
are applied as 2.15 applied them. Each class keeps its v1 signature, so
positional arguments bind as they did.
"""

from __future__ import annotations

import tensorflow as tf

from elastimator.premade import baseline, dnn, linear, wide_deep

V1_LOSS_REDUCTION = tf.compat.v1.losses.Reduction.SUM
_relu = tf.nn.relu


def _doc(cls: type) -> str:
    return (f"`tf.compat.v1.estimator.{cls.__name__}`: `elastimator.{cls.__name__}` with the v1 defaults and "
            "arguments (see elastimator.premade.v1).")


class DNNClassifier(dnn.DNNClassifier):
    __doc__ = _doc(dnn.DNNClassifier)

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=_relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None, loss_reduction=V1_LOSS_REDUCTION,
                 batch_norm=False):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(hidden_units, feature_columns, model_dir, n_classes, weight_column, label_vocabulary,
                         optimizer, activation_fn, dropout, config, warm_start_from, loss_reduction, batch_norm)


class DNNRegressor(dnn.DNNRegressor):
    __doc__ = _doc(dnn.DNNRegressor)

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=_relu, dropout=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=V1_LOSS_REDUCTION, batch_norm=False):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(hidden_units, feature_columns, model_dir, label_dimension, weight_column, optimizer,
                         activation_fn, dropout, config, warm_start_from, loss_reduction, batch_norm)


class DNNEstimator(dnn.DNNEstimator):
    __doc__ = _doc(dnn.DNNEstimator)

    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad", activation_fn=_relu,
                 dropout=None, input_layer_partitioner=None, config=None, warm_start_from=None, batch_norm=False):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(head, hidden_units, feature_columns, model_dir, optimizer, activation_fn, dropout, config,
                         warm_start_from, batch_norm)


class LinearClassifier(linear.LinearClassifier):
    __doc__ = _doc(linear.LinearClassifier)

    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None,
                 loss_reduction=V1_LOSS_REDUCTION, sparse_combiner="sum"):
        self._partitioner = partitioner
        super().__init__(feature_columns, model_dir, n_classes, weight_column, label_vocabulary, optimizer, config,
                         warm_start_from, loss_reduction, sparse_combiner)


class LinearRegressor(linear.LinearRegressor):
    __doc__ = _doc(linear.LinearRegressor)

    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None, loss_reduction=V1_LOSS_REDUCTION,
                 sparse_combiner="sum"):
        self._partitioner = partitioner
        super().__init__(feature_columns, model_dir, label_dimension, weight_column, optimizer, config,
                         warm_start_from, loss_reduction, sparse_combiner)


class LinearEstimator(linear.LinearEstimator):
    __doc__ = _doc(linear.LinearEstimator)

    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None, partitioner=None,
                 sparse_combiner="sum", warm_start_from=None):
        self._partitioner = partitioner
        super().__init__(head, feature_columns, model_dir, optimizer, config, sparse_combiner, warm_start_from)


class DNNLinearCombinedClassifier(wide_deep.DNNLinearCombinedClassifier):
    __doc__ = _doc(wide_deep.DNNLinearCombinedClassifier)

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=_relu, dnn_dropout=None,
                 n_classes=2, weight_column=None, label_vocabulary=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=V1_LOSS_REDUCTION, batch_norm=False,
                 linear_sparse_combiner="sum"):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(model_dir, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, n_classes, weight_column,
                         label_vocabulary, config, warm_start_from, loss_reduction, batch_norm, linear_sparse_combiner)


class DNNLinearCombinedRegressor(wide_deep.DNNLinearCombinedRegressor):
    __doc__ = _doc(wide_deep.DNNLinearCombinedRegressor)

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=_relu, dnn_dropout=None,
                 label_dimension=1, weight_column=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=V1_LOSS_REDUCTION, batch_norm=False,
                 linear_sparse_combiner="sum"):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(model_dir, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, label_dimension, weight_column, config,
                         warm_start_from, loss_reduction, batch_norm, linear_sparse_combiner)


class DNNLinearCombinedEstimator(wide_deep.DNNLinearCombinedEstimator):
    __doc__ = _doc(wide_deep.DNNLinearCombinedEstimator)

    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=_relu,
                 dnn_dropout=None, input_layer_partitioner=None, config=None, batch_norm=False,
                 linear_sparse_combiner="sum", *, warm_start_from=None):
        self._input_layer_partitioner = input_layer_partitioner
        super().__init__(head, model_dir, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                         dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, config, batch_norm,
                         linear_sparse_combiner, warm_start_from=warm_start_from)


class BaselineClassifier(baseline.BaselineClassifier):
    __doc__ = _doc(baseline.BaselineClassifier)

    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=V1_LOSS_REDUCTION, *, warm_start_from=None):
        super().__init__(model_dir, n_classes, weight_column, label_vocabulary, optimizer, config, loss_reduction,
                         warm_start_from=warm_start_from)


class BaselineRegressor(baseline.BaselineRegressor):
    __doc__ = _doc(baseline.BaselineRegressor)

    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=V1_LOSS_REDUCTION, *, warm_start_from=None):
        super().__init__(model_dir, label_dimension, weight_column, optimizer, config, loss_reduction,
                         warm_start_from=warm_start_from)


V1_CANNED = {cls.__name__: cls for cls in (
    BaselineClassifier, BaselineRegressor, DNNClassifier, DNNEstimator, DNNLinearCombinedClassifier,
    DNNLinearCombinedEstimator, DNNLinearCombinedRegressor, DNNRegressor, LinearClassifier, LinearEstimator,
    LinearRegressor)}
"""Name -> the canned estimator served as `tf.compat.v1.estimator.<name>`."""

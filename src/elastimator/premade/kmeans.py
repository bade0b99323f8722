"""`KMeans` (`tf.compat.v1.estimator.experimental.KMeans`): K-means clustering as an Estimator, on TensorFlow's own
clustering ops (`clustering_ops.KMeans`, which still ship with TensorFlow: K-means++, mini-batch updates).

Each training step runs one Lloyd iteration over the batch (full batch), or accumulates one mini-batch and
moves the centers every `mini_batch_steps_per_iteration` steps. The centers are chosen on the first batch(es)
by a hook that runs TensorFlow's initializer until they are set. Evaluation reports `score` (the mean over
batches of the summed distance of each point to its nearest center); prediction gives `cluster_index` and
`all_distances`, and exports serve them.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import clustering_ops  # TensorFlow's K-means graph builder (no public alias)

from elastimator.errors import ConfigError, InputFnError
from elastimator.estimator import Estimator, EstimatorSpec, ModeKeys
from elastimator.export.outputs import PredictOutput
from elastimator.premade.features import check_columns, dense_input
from elastimator.premade.keys import SignatureKeys


class _InitializeClustersHook(tf.compat.v1.train.SessionRunHook):
    """Runs the centers' initializer (on the chief) until the centers are set; other trainers wait for them."""

    def __init__(self, init_op, is_initialized, is_chief: bool):
        self._init_op, self._is_initialized, self._is_chief = init_op, is_initialized, is_chief

    def after_create_session(self, session, coord):
        while not session.run(self._is_initialized):
            if self._is_chief:
                session.run(self._init_op)
            else:
                coord.wait_for_stop(0.1)  # the chief sets them


class _LossRelativeChangeHook(tf.compat.v1.train.SessionRunHook):
    """Stops training once the loss changes by less than `tolerance` (relatively) from one step to the next."""

    def __init__(self, loss, tolerance: float):
        self._loss, self._tolerance, self._previous = loss, tolerance, None

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        loss = float(run_values.results)
        if self._previous is not None and abs(loss - self._previous) <= self._tolerance * max(abs(loss), 1e-12):
            run_context.request_stop()
        self._previous = loss


class KMeans(Estimator):
    """K-means clustering (2.15's `tf.compat.v1.estimator.experimental.KMeans`, same arguments).

    Args:
        num_clusters: How many clusters (ignored when `initial_clusters` is an array of centers).
        model_dir, config: As for `Estimator`.
        initial_clusters: `RANDOM_INIT`, `KMEANS_PLUS_PLUS_INIT`, an array of centers, or a function
            `f(inputs, k)` returning up to k centers from a batch.
        distance_metric: `SQUARED_EUCLIDEAN_DISTANCE` or `COSINE_DISTANCE`.
        seed: Seed of the initial centers' choice.
        use_mini_batch: Mini-batch K-means (True) or one full-batch Lloyd iteration per step (False; the
            input_fn then returns the whole data set).
        mini_batch_steps_per_iteration: Steps whose mini-batches accumulate before the centers move.
        kmeans_plus_plus_num_retries: Extra samples per chosen point for K-means++.
        relative_tolerance: Stop training when the loss changes by less than this fraction between steps.
        feature_columns: Columns for `tf.compat.v1.feature_column.input_layer`; None takes the features as the
            points (one tensor, or a dict of one).

    Example:
        >>> kmeans = KMeans(num_clusters=3, use_mini_batch=False)
        >>> kmeans.train(input_fn)
        >>> centers = kmeans.cluster_centers()
    """

    SCORE = "score"
    CLUSTER_CENTERS_VAR_NAME = clustering_ops.CLUSTERS_VAR_NAME
    CLUSTER_INDEX = "cluster_index"
    ALL_DISTANCES = "all_distances"
    SQUARED_EUCLIDEAN_DISTANCE = clustering_ops.SQUARED_EUCLIDEAN_DISTANCE
    COSINE_DISTANCE = clustering_ops.COSINE_DISTANCE
    RANDOM_INIT = clustering_ops.RANDOM_INIT
    KMEANS_PLUS_PLUS_INIT = clustering_ops.KMEANS_PLUS_PLUS_INIT

    def __init__(self, num_clusters, model_dir=None, initial_clusters=RANDOM_INIT,
                 distance_metric=SQUARED_EUCLIDEAN_DISTANCE, seed=None, use_mini_batch=True,
                 mini_batch_steps_per_iteration=1, kmeans_plus_plus_num_retries=2, relative_tolerance=None,
                 config=None, feature_columns=None):
        if isinstance(initial_clusters, str) and initial_clusters not in (self.RANDOM_INIT,
                                                                          self.KMEANS_PLUS_PLUS_INIT):
            raise ConfigError(f"KMeans: initial_clusters must be {self.RANDOM_INIT!r}, {self.KMEANS_PLUS_PLUS_INIT!r}, "
                              f"an array of centers or a function; got {initial_clusters!r}.")
        if distance_metric not in (self.SQUARED_EUCLIDEAN_DISTANCE, self.COSINE_DISTANCE):
            raise ConfigError(f"KMeans: distance_metric must be {self.SQUARED_EUCLIDEAN_DISTANCE!r} or "
                              f"{self.COSINE_DISTANCE!r}; got {distance_metric!r}.")
        if isinstance(initial_clusters, (np.ndarray, list, tuple)):
            initial_clusters = np.asarray(initial_clusters, dtype=np.float32)
        self._kmeans_args = dict(
            num_clusters=num_clusters, initial_clusters=initial_clusters, distance_metric=distance_metric,
            use_mini_batch=use_mini_batch, mini_batch_steps_per_iteration=mini_batch_steps_per_iteration,
            random_seed=seed or 0, kmeans_plus_plus_num_retries=kmeans_plus_plus_num_retries)
        self._relative_tolerance = relative_tolerance
        self._columns = None if feature_columns is None else check_columns(feature_columns, "feature_columns")
        super().__init__(self._kmeans_model_fn, model_dir=model_dir, config=config)

    def _inputs(self, features) -> tf.Tensor | list:
        if self._columns is not None:
            return dense_input(features, self._columns)
        if isinstance(features, Mapping):
            if len(features) != 1:
                raise InputFnError(f"KMeans: features must be one tensor (or a dict of one); got the keys "
                                   f"{sorted(features)}. Pass feature_columns to say how they make a point.")
            (features,) = features.values()
        return tf.cast(features, tf.float32)

    def _kmeans_model_fn(self, features, mode, config):
        all_distances, cluster_index, losses, is_initialized, init_op, training_op = clustering_ops.KMeans(
            self._inputs(features), **self._kmeans_args).training_graph()
        loss = tf.reduce_sum(losses)
        tf.compat.v1.summary.scalar("loss/raw", loss)
        step = tf.compat.v1.assign_add(tf.compat.v1.train.get_global_step(), 1)
        with tf.control_dependencies([training_op, step]):
            train_op = tf.identity(loss)
        hooks = [_InitializeClustersHook(init_op, is_initialized, config.is_chief)]
        if self._relative_tolerance is not None:
            hooks.append(_LossRelativeChangeHook(loss, self._relative_tolerance))
        predictions = {self.ALL_DISTANCES: all_distances[0], self.CLUSTER_INDEX: cluster_index[0]}
        export_outputs = {self.ALL_DISTANCES: PredictOutput(all_distances[0]),
                          self.CLUSTER_INDEX: PredictOutput(cluster_index[0]),
                          SignatureKeys.SERVING_DEFAULT: PredictOutput(cluster_index[0])}
        return EstimatorSpec(mode, predictions=predictions, loss=loss,
                             train_op=train_op if mode == ModeKeys.TRAIN else None,
                             eval_metric_ops={self.SCORE: tf.compat.v1.metrics.mean(loss)},
                             training_hooks=hooks, export_outputs=export_outputs)

    def cluster_centers(self) -> np.ndarray:
        """The cluster centers in the newest checkpoint, [num_clusters, dimension]."""
        return self.get_variable_value(self.CLUSTER_CENTERS_VAR_NAME)

    def predict_cluster_index(self, input_fn):
        """Yields the index of the nearest center for each input example."""
        for prediction in self.predict(input_fn, predict_keys=[self.CLUSTER_INDEX]):
            yield prediction[self.CLUSTER_INDEX]

    def score(self, input_fn) -> float:
        """The summed distance of the inputs of one batch of `input_fn` to their nearest centers."""
        return self.evaluate(input_fn=input_fn, steps=1)[self.SCORE]

    def transform(self, input_fn):
        """Yields, for each input example, its distance to every center (squared, with the squared Euclidean
        metric; scikit-learn's transform gives Euclidean distances)."""
        for prediction in self.predict(input_fn, predict_keys=[self.ALL_DISTANCES]):
            yield prediction[self.ALL_DISTANCES]

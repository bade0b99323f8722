"""`elastimator.experimental`: the names tf.estimator kept under `tf.estimator.experimental` (and, for the logit-fn
builders, `tf.compat.v1.estimator.experimental`), and `SavedModelEstimator`, which 2.15's own docstring
showed there though 2.15 kept it in a private module."""

from elastimator.export.receivers import build_raw_supervised_input_receiver_fn
from elastimator.premade.kmeans import KMeans
from elastimator.premade.logit_fns import call_logit_fn, dnn_logit_fn_builder, linear_logit_fn_builder
from elastimator.premade.rnn import RNNClassifier, RNNEstimator
from elastimator.premade.saved_model_estimator import SavedModelEstimator
from elastimator.premade.sdca import LinearSDCA
from elastimator.train_eval.early_stopping import (
    make_early_stopping_hook,
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)
from elastimator.train_eval.in_memory_evaluator import InMemoryEvaluatorHook
from elastimator.train_eval.stop_at_checkpoint import make_stop_at_checkpoint_step_hook

__all__ = [
    "InMemoryEvaluatorHook",
    "KMeans",
    "LinearSDCA",
    "RNNClassifier",
    "RNNEstimator",
    "SavedModelEstimator",
    "build_raw_supervised_input_receiver_fn",
    "call_logit_fn",
    "dnn_logit_fn_builder",
    "linear_logit_fn_builder",
    "make_early_stopping_hook",
    "make_stop_at_checkpoint_step_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]

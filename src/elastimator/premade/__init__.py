"""`elastimator.premade`: heads and the canned estimators built on them.

The heads turn logits into predictions, losses, metrics, train ops and serving
signatures; the canned estimators (linear, DNN, wide & deep, baseline, DeepFM)
compute logits from feature columns and hand them to a head. Everything here
uses only the public engine (`Estimator`, `EstimatorSpec`, `export`).
"""

from elastimator.premade.baseline import BaselineClassifier, BaselineEstimator, BaselineRegressor
from elastimator.premade.canned import CannedEstimator
from elastimator.premade.classification import BinaryClassHead, MultiClassHead, MultiLabelHead
from elastimator.premade.deepfm import DeepFMClassifier
from elastimator.premade.dnn import DNNClassifier, DNNEstimator, DNNRegressor
from elastimator.premade.features import classifier_parse_example_spec, regressor_parse_example_spec
from elastimator.premade.head import Head
from elastimator.premade.keys import MetricKeys, PredictionKeys, SignatureKeys
from elastimator.premade.linear import LinearClassifier, LinearEstimator, LinearRegressor
from elastimator.premade.multi_head import MultiHead
from elastimator.optimizers import get_optimizer_instance
from elastimator.premade.regression import LogisticRegressionHead, PoissonRegressionHead, RegressionHead
from elastimator.premade.wide_deep import (
    DNNLinearCombinedClassifier,
    DNNLinearCombinedEstimator,
    DNNLinearCombinedRegressor,
)

__all__ = [
    "BaselineClassifier",
    "BaselineEstimator",
    "BaselineRegressor",
    "BinaryClassHead",
    "CannedEstimator",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "DeepFMClassifier",
    "Head",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
    "LogisticRegressionHead",
    "MetricKeys",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "PoissonRegressionHead",
    "PredictionKeys",
    "RegressionHead",
    "SignatureKeys",
    "classifier_parse_example_spec",
    "get_optimizer_instance",
    "regressor_parse_example_spec",
]

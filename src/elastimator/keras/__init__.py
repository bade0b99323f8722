"""`elastimator.keras`: compiled Keras 3 models as estimators."""

from elastimator.keras.model_to_estimator import model_to_estimator

__all__ = ["model_to_estimator"]

"""Shared fixtures: small real data sets and Estimators over them."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import elastimator as est  # noqa: E402
from tests.helpers import DLROVER_EXAMPLES, linear_model_fn  # noqa: E402


@pytest.fixture(scope="session")
def iris():
    """scikit-learn's iris: (x float32 [150, 4], y int32 [150])."""
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y.astype(np.int32)


@pytest.fixture
def make_estimator(tmp_path):
    """Builds an Estimator over linear_model_fn in a fresh model_dir."""

    def make(model_fn=linear_model_fn, params=None, **config):
        config.setdefault("log_step_count_steps", None)
        config.setdefault("tf_random_seed", 7)  # thresholds on learned metrics hold on every run
        return est.Estimator(
            model_fn, model_dir=str(tmp_path / "model"), params=params or {"n_classes": 3},
            config=est.RunConfig(**config),
        )

    return make


def _dlrover_examples_line() -> str:
    if DLROVER_EXAMPLES.is_dir():
        return f"DLRover's examples: {DLROVER_EXAMPLES} (their tests run)"
    return (f"DLRover's examples: NOT FOUND at {DLROVER_EXAMPLES}, so their tests SKIP (DLRover's own example "
            "confs and models, from its repository's examples/tensorflow, run unedited as fixtures: put a copy at "
            "that path, or set ELASTIMATOR_SHARED to the folder holding dlrover-examples; see the README)")


def pytest_report_header(config):
    return [_dlrover_examples_line()]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not DLROVER_EXAMPLES.is_dir():
        terminalreporter.write_line(_dlrover_examples_line(), yellow=True, bold=True)

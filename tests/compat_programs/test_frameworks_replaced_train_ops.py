"""Programs whose model_fn is called from inside another's, compared with tf.estimator 2.15 (reference_tf215.json):
a train op built and replaced (Neural Structured Learning's regularizers), canned estimators' model_fns called
under a framework's own variable scopes (AdaNet's AutoEnsembleEstimator).
"""

from __future__ import annotations

import pytest

from tests.compat_programs.test_programs import REFERENCE, run_program

pytestmark = pytest.mark.integration


def test_a_train_op_built_and_not_returned_is_not_run_as_in_2_15(tmp_path):
    got, reference = run_program("discarded_train_op", tmp_path), REFERENCE["discarded_train_op"]
    assert got["variables"] == reference["variables"]
    assert got["global_step"] == reference["global_step"] == 30
    # The dropped Adam's slots and beta powers keep their initial values, the tf.keras BatchNormalization's
    # ungrouped moving statistics theirs; the returned Adagrad's arithmetic is deterministic from zeros.
    for name, value in reference["abs_sums"].items():
        assert got["abs_sums"][name] == pytest.approx(value, rel=1e-4, abs=1e-5), name
    assert reference["abs_sums"]["dropped/w/Adam"] == 0.0 and reference["abs_sums"]["bn/moving_mean"] == 0.0

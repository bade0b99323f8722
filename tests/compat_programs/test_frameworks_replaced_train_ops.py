"""Programs whose model_fn is called from inside another's, compared with tf.estimator 2.15 (reference_tf215.json):
a train op built and replaced (Neural Structured Learning's regularizers), canned estimators' model_fns called
under a framework's own variable scopes (AdaNet's AutoEnsembleEstimator).
"""

from __future__ import annotations

import re

import pytest

from tests.compat_programs.test_programs import REFERENCE, run_program

pytestmark = pytest.mark.integration


def test_a_train_op_built_and_not_returned_is_not_run_as_in_2_15(tmp_path):
    got, reference = run_program("discarded_train_op", tmp_path), REFERENCE["discarded_train_op"]
    assert got["variables"] == reference["variables"]
    assert got["global_step"] == reference["global_step"] == 30
    # The dropped Adam's slots and beta powers keep their initial values, the hand-kept momentum its zeros; the
    # returned Adagrad's arithmetic is deterministic from zeros.
    for name, value in reference["abs_sums"].items():
        assert got["abs_sums"][name] == pytest.approx(value, rel=1e-4, abs=1e-5), name
    assert reference["abs_sums"]["dropped/w/Adam"] == 0.0 and reference["abs_sums"]["momentum"] == 0.0


def _without_repeated_scope(name: str) -> str:
    """A canned DNN's variable name with 2.15's repeat of the enclosing name scope taken out: 2.15's Keras layers
    named the variables of a DNN called under a scope 'S' as 'S/dnn/S/hiddenlayer_0/kernel'; elastimator's are
    'S/dnn/hiddenlayer_0/kernel', as 2.15's were at the graph's root (docs/migration.md)."""
    return re.sub(r"^(?P<scope>.+)/dnn/(?P=scope)/", r"\g<scope>/dnn/", name)


@pytest.mark.slow
def test_adanet_auto_ensembles_canned_dnn_and_linear_candidates_as_on_2_15(tmp_path):
    got, reference = run_program("adanet_autoensemble", tmp_path), REFERENCE["adanet_autoensemble"]
    # Two iterations, the same candidate chosen at each: every candidate trained as on 2.15.
    assert got["architecture"] == reference["architecture"]
    for key in ("iteration", "global_step", "best_ensemble_index_0", "best_ensemble_index_1"):
        assert got["metrics"][key] == reference["metrics"][key], key
    assert sorted(got["metrics"]) == sorted(reference["metrics"])
    # Equal to 2.15's in the recorded runs (accuracy 0.980, loss 0.092); margins for TensorFlow's arithmetic.
    assert got["metrics"]["accuracy"] >= reference["metrics"]["accuracy"] - 0.02
    assert got["metrics"]["loss"] <= reference["metrics"]["loss"] * 1.5 + 0.02
    assert got["prediction_keys"] == reference["prediction_keys"]
    assert got["prediction_shapes"] == reference["prediction_shapes"]
    assert got["probabilities"] == pytest.approx(reference["probabilities"], abs=0.05)
    assert got["candidate_variables"] == [_without_repeated_scope(n) for n in reference["candidate_variables"]]
    assert got["latest_checkpoint"] == reference["latest_checkpoint"]


@pytest.mark.slow
def test_neural_structured_learning_regularizers_train_with_their_own_train_op_as_on_2_15(tmp_path):
    run = run_program("nsl_estimators", tmp_path)
    for wrapper in ("adversarial", "graph"):
        got, reference = run[wrapper], REFERENCE["nsl_estimators"][wrapper]
        assert got["variables"] == reference["variables"], wrapper
        assert got["global_step"] == reference["global_step"] == 60, wrapper  # the base model's increments never ran
        assert got["prediction_keys"] == reference["prediction_keys"], wrapper
        # Seeded initializers, one graph-level seed, no dropout: equal to 2.15's to the digits stored in the
        # recorded runs (the base model's own Adagrad accumulators stay at their initial 0.1 on both); margins
        # for TensorFlow's arithmetic.
        for name, value in reference["abs_sums"].items():
            assert got["abs_sums"][name] == pytest.approx(value, rel=1e-3, abs=1e-3), (wrapper, name)
        assert got["metrics"]["global_step"] == reference["metrics"]["global_step"], wrapper
        assert got["metrics"]["accuracy"] >= reference["metrics"]["accuracy"] - 0.01, wrapper
        assert got["metrics"]["loss"] == pytest.approx(reference["metrics"]["loss"], rel=0.02), wrapper
        assert got["probabilities"] == pytest.approx(reference["probabilities"], abs=0.01), wrapper

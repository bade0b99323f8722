"""Frameworks built on tf.estimator, each on its documented Estimator path, run unedited under
`python -m elastimator.compat` and compared with the same program on tf.estimator 2.15 (reference_tf215.json).

The frameworks are installed `--no-deps` by scripts/test.sh (they pin TensorFlow releases before 2.16); a program
carries, marked, the fixes its framework needs on TensorFlow 2.15 as well (moved TensorFlow internals, Python 3.11
removals), and runs with them on both. Training is not bit-for-bit between TensorFlow versions (random streams,
unseeded initializers), so quality is compared against 2.15's within a re-run's spread, measured for each program;
structure (metric names, prediction keys and shapes, signatures, checkpoints, variables) exactly.
"""

from __future__ import annotations

import pytest

from tests.compat_programs.test_programs import REFERENCE, run_program

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# 2.15 left out a classification or regression signature whose input is not serialized tf.Examples (and with it a
# serving_default that was one); elastimator writes each as a predict signature (docs/migration.md).
_DOCUMENTED_EXTRA_SIGNATURES = {"classification", "regression", "serving_default"}


def _same_signatures(got: list, reference: list) -> None:
    assert set(reference) <= set(got), (got, reference)
    assert set(got) - set(reference) <= _DOCUMENTED_EXTRA_SIGNATURES, (got, reference)


def test_adanet_grows_evaluates_predicts_and_exports_an_ensemble_as_on_2_15(tmp_path):
    got, reference = run_program("adanet_ensemble", tmp_path), REFERENCE["adanet_ensemble"]
    # Three iterations, the same candidates chosen at each, the same architecture.
    assert got["architecture"] == reference["architecture"]
    for key in ("iteration", "global_step", "best_ensemble_index_0", "best_ensemble_index_1", "best_ensemble_index_2"):
        assert got["metrics"][key] == reference["metrics"][key], key
    assert sorted(got["metrics"]) == sorted(reference["metrics"])
    assert got["metrics"]["accuracy"] >= reference["metrics"]["accuracy"] - 0.02  # 0.98 on both
    assert got["metrics"]["loss"] <= reference["metrics"]["loss"] * 1.5 + 0.02  # 0.052 on both
    assert got["prediction_keys"] == reference["prediction_keys"]
    assert got["prediction_shapes"] == reference["prediction_shapes"]
    assert got["probabilities"] == pytest.approx(reference["probabilities"], abs=0.05)
    _same_signatures(got["signatures"], reference["signatures"])
    assert got["served_keys"] == reference["served_keys"]
    assert got["served_probabilities"] == pytest.approx(got["probabilities"], abs=1e-3)  # the export serves predict()
    assert got["latest_checkpoint"] == reference["latest_checkpoint"]


def test_tf_ranking_keras_model_to_estimator_with_keras_ranking_metrics(tmp_path):
    got, reference = run_program("ranking_keras", tmp_path), REFERENCE["ranking_keras"]
    assert sorted(got["metrics"]) == sorted(reference["metrics"])
    for key, value in reference["metrics"].items():
        if key.startswith("metric/"):  # NDCG, MRR, ARP, ...: Keras metric objects, updated through a tf.function
            assert got["metrics"][key] == pytest.approx(value, abs=0.03), key
    assert got["metrics"]["loss"] == pytest.approx(reference["metrics"]["loss"], rel=0.05)
    assert got["scores_shape"] == reference["scores_shape"] == [256, 4]
    _same_signatures(got["signatures"], reference["signatures"])
    assert got["served_keys"] == reference["served_keys"]
    assert got["served_scores"] == got["scores"]


def test_tf_ranking_canned_dnn_ranking_estimator(tmp_path):
    got, reference = run_program("ranking_canned", tmp_path), REFERENCE["ranking_canned"]
    assert sorted(got["metrics"]) == sorted(reference["metrics"])
    for key in ("metric/ndcg", "metric/mrr", "metric/ndcg_5"):
        assert got["metrics"][key] >= reference["metrics"][key] - 0.03, key
    assert got["scores_shape"] == reference["scores_shape"]
    _same_signatures(got["signatures"], reference["signatures"])
    assert got["served_keys"] == reference["served_keys"]
    assert got["served_equals_predicted"] and reference["served_equals_predicted"]


def test_tf_gan_estimator_learns_the_distribution_as_on_2_15(tmp_path):
    got, reference = run_program("gan_estimator", tmp_path), REFERENCE["gan_estimator"]
    for key in ("metric_keys", "global_step", "sample_count", "variables", "real_mean"):
        assert got[key] == reference[key], key
    # The generated samples' mean reaches the real data's 3.0 (2.95-3.04 on both over five runs).
    assert abs(got["generated_mean"] - got["real_mean"]) < 0.25
    assert abs(got["sample_mean"] - reference["sample_mean"]) < 0.3


def test_easyrec_pipeline_trains_evaluates_exports_and_serves_as_on_2_15(tmp_path):
    got = run_program("easyrec_pipeline", tmp_path, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    reference = REFERENCE["easyrec_pipeline"]
    for key in ("checkpoints", "input_names", "output_keys"):
        assert got[key] == reference[key], key
    assert sorted(got["metrics"]) == sorted(reference["metrics"])
    assert got["metrics"]["global_step"] == reference["metrics"]["global_step"] == 300
    # Unseeded embeddings: AUC 0.87-0.93 over runs on either TensorFlow.
    assert got["metrics"]["auc"] >= reference["metrics"]["auc"] - 0.08 and got["metrics"]["auc"] >= 0.82
    assert len(got["probs"]) == 16 and all(0.0 <= p <= 1.0 for p in got["probs"])

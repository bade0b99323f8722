"""TF Lattice 2.0.13's canned estimators (the last release that has them) on their documented path, run unedited
under `python -m elastimator.compat` and compared with the same program on tf.estimator 2.15
(reference_tf215.json), as test_frameworks.py compares the other frameworks.

TF Lattice reaches `estimator.maybe_overwrite_model_dir_and_session_config` and
`canned.optimizers.get_optimizer_instance_v2`, imports `estimator_lib` by the private path, and makes a tf-keras
optimizer's `iterations` the global step before handing it to a head (which must not assign them again).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.compat_programs.test_frameworks import _same_signatures
from tests.compat_programs.test_programs import REFERENCE, run_program

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tf_lattice_canned_classifier_and_crystals_ensemble_as_on_2_15(tmp_path):
    if importlib.util.find_spec("tensorflow_lattice") is None:  # found, not imported: it needs tf.estimator
        pytest.skip("TF Lattice is not installed (scripts/test.sh installs tensorflow-lattice==2.0.13)")
    got, reference = run_program("lattice_canned", tmp_path), REFERENCE["lattice_canned"]
    # Structure: the same keypoints from the feature analysis (quantiles of the same data), steps, keys, variables.
    assert got["keypoints"].keys() == reference["keypoints"].keys()
    for name, keypoints in reference["keypoints"].items():
        assert got["keypoints"][name] == pytest.approx(keypoints, rel=1e-6), name
    for key in ("global_step", "metric_keys", "prediction_keys", "prediction_count", "served_keys", "variables",
                "crystals_global_step", "crystals_variables"):
        assert got[key] == reference[key], key
    _same_signatures(got["signatures"], reference["signatures"])
    # Quality, within 2.15's own spread over five runs of this program: accuracy 0.8875-0.9 (of 80 examples), AUC
    # 0.956-0.961, loss 0.318-0.320, the four probabilities up to 0.078 apart (elastimator: 0.9, 0.959, 0.318).
    assert got["accuracy"] >= reference["accuracy"] - 0.05
    assert got["auc"] == pytest.approx(reference["auc"], abs=0.02)
    assert got["loss"] == pytest.approx(reference["loss"], rel=0.1)
    assert got["probabilities"] == pytest.approx(reference["probabilities"], abs=0.1)
    assert got["served_probabilities"] == pytest.approx(got["probabilities"], abs=1e-3)  # the export serves predict()
    # Crystals: two 2-feature lattices covering every feature, chosen from the prefitting model's torsions (about
    # 0.001-0.009 after its 10 steps), which 2.15 itself varies from run to run: it chose two different pairings
    # over five runs, so the pairs are not compared.
    lattices = got["crystals_lattices"]
    assert len(lattices) == 2 and all(len(set(features)) == 2 for features in lattices)
    assert {name for features in lattices for name in features} == {"age", "chol", "thalach", "thal"}

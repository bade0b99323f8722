"""TF Lattice 2.0.13's canned estimators, as its canned-estimator tutorial and `tfl.estimators` docstring use them:
feature columns with `tfl.configs.FeatureConfig`s (monotonic calibrators, a categorical feature with a monotone
order), keypoints from a `feature_analysis_input_fn`, a `tfl.estimators.CannedClassifier` of a
`CalibratedLatticeConfig` trained, evaluated, used to predict and exported for serving, and a Crystals lattice
ensemble (`CalibratedLatticeEnsembleConfig(lattices='crystals')`) whose structure a prefitting estimator trained
on `prefitting_input_fn` chooses, then trained itself. Data is generated: a heart-disease-like label rising with age and cholesterol,
falling with the maximum heart rate. Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_lattice as tfl

# A user fix TF Lattice 2.0.13 needs with numpy 2 on any TensorFlow (not tf.estimator's): its keypoints call
# np.quantile(..., interpolation=...), an argument numpy 2 removed for `method` (numpy 1.22 on, so on 2.15 too).
_quantile = np.quantile
np.quantile = lambda *args, interpolation="linear", **kwargs: _quantile(*args, method=interpolation, **kwargs)

rng = np.random.RandomState(0)
ROWS = 400
AGE = rng.uniform(30, 75, ROWS).astype("float32")
CHOL = rng.uniform(130, 400, ROWS).astype("float32")
THALACH = rng.uniform(90, 200, ROWS).astype("float32")
THAL = rng.choice(["normal", "fixed", "reversible"], ROWS)
_SCORE = (0.08 * (AGE - 52) + 0.012 * (CHOL - 260) - 0.04 * (THALACH - 145)
          + np.where(THAL == "normal", -0.8, 0.6) + rng.normal(0, 0.5, ROWS))
LABEL = (_SCORE > 0).astype("int64")
TRAIN = slice(0, 320)
TEST = slice(320, ROWS)


def _features(rows):
    return {"age": AGE[rows], "chol": CHOL[rows], "thalach": THALACH[rows], "thal": THAL[rows]}


def input_fn(rows, epochs, shuffle, batch=32):
    def make():
        dataset = tf.data.Dataset.from_tensor_slices((_features(rows), LABEL[rows]))
        if shuffle:
            dataset = dataset.shuffle(1000, seed=1)
        return dataset.repeat(epochs).batch(batch)
    return make


FEATURE_COLUMNS = [
    tf.feature_column.numeric_column("age"),
    tf.feature_column.numeric_column("chol"),
    tf.feature_column.numeric_column("thalach"),
    tf.feature_column.categorical_column_with_vocabulary_list("thal", ["normal", "fixed", "reversible"]),
]


def feature_configs():
    return [
        tfl.configs.FeatureConfig(name="age", lattice_size=3, monotonicity="increasing",
                                  pwl_calibration_num_keypoints=5),
        tfl.configs.FeatureConfig(name="chol", monotonicity="increasing",
                                  pwl_calibration_input_keypoints=[130.0, 200.0, 260.0, 320.0, 400.0],
                                  pwl_calibration_clip_min=130, pwl_calibration_clamp_min=True),
        tfl.configs.FeatureConfig(name="thalach", monotonicity="decreasing", pwl_calibration_num_keypoints=5),
        tfl.configs.FeatureConfig(name="thal", num_buckets=3,
                                  monotonicity=[("normal", "fixed"), ("normal", "reversible")]),
    ]


def _predictions(estimator):
    return list(estimator.predict(input_fn(TEST, 1, False, batch=40)))


def _read_json(*path):
    with open(os.path.join(*path), encoding="utf-8") as f:
        return json.load(f)


def main(model_dir):
    # TF Lattice writes its keypoints file into model_dir before the estimator makes it (the tutorial's model_dir
    # is a fresh temporary directory), so the directories are made first.
    for name in ("lattice", "crystals"):
        os.makedirs(os.path.join(model_dir, name))
    config = tf.estimator.RunConfig(tf_random_seed=42)
    analysis = input_fn(TRAIN, 1, False)
    lattice = tfl.estimators.CannedClassifier(
        feature_columns=FEATURE_COLUMNS,
        model_config=tfl.configs.CalibratedLatticeConfig(feature_configs=feature_configs()),
        feature_analysis_input_fn=analysis,
        optimizer=tf.keras.optimizers.legacy.Adam(0.05),
        model_dir=os.path.join(model_dir, "lattice"), config=config)
    lattice.train(input_fn=input_fn(TRAIN, 5, True))
    metrics = lattice.evaluate(input_fn=input_fn(TEST, 1, False))
    predictions = _predictions(lattice)
    spec = tf.feature_column.make_parse_example_spec(FEATURE_COLUMNS)
    export_dir = lattice.export_saved_model(os.path.join(model_dir, "export"),
                                            tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    export_dir = export_dir.decode() if isinstance(export_dir, bytes) else export_dir
    loaded = tf.saved_model.load(export_dir)
    serving = loaded.signatures["predict"]
    examples = []
    for i in range(TEST.start, TEST.start + 4):
        example = tf.train.Example()
        for name in ("age", "chol", "thalach"):
            example.features.feature[name].float_list.value.append(float(_features(i)[name]))
        example.features.feature["thal"].bytes_list.value.append(str(THAL[i]).encode())
        examples.append(example.SerializeToString())
    served = serving(examples=tf.constant(examples))

    crystals = tfl.estimators.CannedClassifier(
        feature_columns=FEATURE_COLUMNS,
        model_config=tfl.configs.CalibratedLatticeEnsembleConfig(
            feature_configs=feature_configs(), lattices="crystals", num_lattices=2, lattice_rank=2),
        feature_analysis_input_fn=analysis,
        prefitting_input_fn=input_fn(TRAIN, 1, True),
        optimizer=tf.keras.optimizers.legacy.Adam(0.05),
        prefitting_optimizer=tf.keras.optimizers.legacy.Adam(0.05),
        model_dir=os.path.join(model_dir, "crystals"), config=config)
    crystals.train(input_fn=input_fn(TRAIN, 1, True))

    print("RESULT " + json.dumps({
        "metric_keys": sorted(metrics),
        "global_step": int(metrics["global_step"]),
        "accuracy": float(metrics["accuracy"]),
        "auc": float(metrics["auc"]),
        "loss": float(metrics["loss"]),
        "prediction_keys": sorted(predictions[0]),
        "prediction_count": len(predictions),
        "probabilities": [round(float(p["probabilities"][1]), 4) for p in predictions[:4]],
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_probabilities": [round(float(p[1]), 4) for p in served["probabilities"].numpy()],
        "variables": sorted(name for name in lattice.get_variable_names() if "Adam" not in name),
        "crystals_global_step": int(crystals.get_variable_value("global_step")),
        "crystals_variables": sorted(name for name in crystals.get_variable_names() if "Adam" not in name),
        "crystals_lattices": sorted(sorted(features) for features in _read_json(model_dir, "crystals",
                                                                                    "ensemble_structure.json")),
        "keypoints": _read_json(model_dir, "lattice", "keypoints.json"),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

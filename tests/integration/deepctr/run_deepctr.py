"""DeepCTR 0.9.4's estimator models, unmodified, on elastimator (run under `python -m elastimator.compat`).

The program below is written the way DeepCTR's own estimator examples are: TF 2 imports,
feature columns, DeepCTR's `input_fn_pandas`, `model.train` / `model.evaluate`. Nothing in it
mentions elastimator. It trains each model named on the command line on a Criteo-shaped
sample and prints one JSON line per model: {"model", "ok", "auc", "logloss", "error"}.

Usage: python -m elastimator.compat run_deepctr.py DATA.tsv MODEL_DIR_ROOT --epochs N Model1 [Model2 ...]
"""

import argparse
import json

import pandas as pd
import tensorflow as tf
from sklearn.preprocessing import LabelEncoder

import deepctr.estimator as deepctr_estimator
from deepctr.estimator.inputs import input_fn_pandas


def load(path):
    dense = [f"I{i}" for i in range(1, 14)]
    sparse = [f"C{i}" for i in range(1, 27)]
    data = pd.read_csv(path, sep="\t", names=["label"] + dense + sparse)
    data[sparse] = data[sparse].fillna("-1").astype(str)
    data[dense] = data[dense].fillna(0).astype("float32")
    for feat in sparse:
        data[feat] = LabelEncoder().fit_transform(data[feat])
    data[dense] = (data[dense] - data[dense].min()) / (data[dense].max() - data[dense].min() + 1e-6)
    return data, sparse, dense


def columns(data, sparse, dense):
    dnn = [tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_identity(f, data[f].max() + 1), 4) for f in sparse]
    dnn += [tf.feature_column.numeric_column(f) for f in dense]
    linear = [tf.feature_column.categorical_column_with_identity(f, data[f].max() + 1) for f in sparse]
    linear += [tf.feature_column.numeric_column(f) for f in dense]
    return linear, dnn


def main(path, root, epochs, names):
    data, sparse, dense = load(path)
    split = int(len(data) * 0.8)
    train, test = data[:split], data[split:]
    linear, dnn = columns(data, sparse, dense)
    features = sparse + dense
    for name in names:
        result = {"model": name}
        try:
            cls = getattr(deepctr_estimator, name)
            # PNN takes only DNN columns; every other model takes (linear, dnn).
            args = (dnn,) if name == "PNNEstimator" else (linear, dnn)
            model = cls(*args, model_dir=f"{root}/{name}")
            model.train(input_fn_pandas(train, features, "label", batch_size=256, num_epochs=epochs, shuffle=True))
            metrics = model.evaluate(input_fn_pandas(test, features, "label", batch_size=1024))
            result.update(ok=True, auc=float(metrics["AUC"]), logloss=float(metrics["LogLoss"]),
                          steps=int(metrics["global_step"]))
        except Exception as e:  # noqa: BLE001  # Each model's outcome is reported, whatever it is.
            result.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("model_dir_root")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    main(args.data, args.model_dir_root, args.epochs, args.models)

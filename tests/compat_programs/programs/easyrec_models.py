"""EasyRec's documented path for four more model types, each a pipeline config written as its model page in EasyRec's
docs writes one: MultiTower (a user and an item tower and a final DNN), WideAndDeep, DSSM (a user and an item tower
scored by their inner product) and MMoE (two tasks, click and buy, over shared experts). Each runs through
`easy_rec.python.main`: `train_and_evaluate`, `evaluate`, `export`, then EasyRec's own `Predictor` on the export,
over one generated CSV of user and item ids, numbers and two labels. All four in one process; prints
`RESULT {json}` with each model's metrics, checkpoints, export inputs and outputs and predictions.

It carries the same marked fixes as easyrec_pipeline.py, needed on TensorFlow 2.15 itself (not tf.estimator's):
pure-Python protobuf for EasyRec's generated protos (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, set by whoever
runs this), TensorFlow internals that moved and one Python 3.10 removal.
"""
import collections
import collections.abc
import json
import os
import sys

import numpy as np
import tensorflow as tf

# User fixes EasyRec 0.7.1 needs on TensorFlow >= 2.13 (2.15 included), not tf.estimator's: internals it calls that
# moved or went away.
from tensorflow.python.framework import ops  # noqa: E402
from tensorflow.python.ops import array_ops, control_flow_ops, variable_scope  # noqa: E402
from tensorflow.python.util import nest  # noqa: E402

for module, name, value in ((nest, "is_sequence", nest.is_nested), (array_ops, "stack", tf.stack),
                            (control_flow_ops, "cond", tf.compat.v1.cond), (ops, "IndexedSlices", tf.IndexedSlices),
                            (ops, "Tensor", tf.Tensor), (variable_scope, "variable", tf.compat.v1.Variable)):
    if not hasattr(module, name):
        setattr(module, name, value)
# ... and one Python 3.10 removed.
collections.Iterator = collections.abc.Iterator

from easy_rec.python import main as easy_rec_main  # noqa: E402
from easy_rec.python.inference.predictor import Predictor  # noqa: E402

USER = ["user_id", "age_level"]
ITEM = ["item_id", "cate_id"]
NUMBERS = ["price", "ctr_7d"]
LABELS = ["clk", "buy"]
STEPS = 100

PIPELINE = """
train_input_path: "%(train)s"
eval_input_path: "%(eval)s"
model_dir: "%(model_dir)s"
train_config {
  log_step_count_steps: 40
  optimizer_config: {
    adam_optimizer: { learning_rate: { constant_learning_rate { learning_rate: 0.005 } } }
    use_moving_average: false
  }
  save_checkpoints_steps: 50
  num_steps: %(steps)d
}
eval_config { metrics_set: { auc {} } }
data_config {
  separator: ","
%(fields)s
%(labels)s
  batch_size: 128
  num_epochs: 1000
  prefetch_size: 4
  input_type: CSVInput
}
feature_config: {
%(features)s
}
model_config: {
%(model)s
}
export_config { multi_placeholder: false filter_inputs: true }
"""


def group(name, features, kind="DEEP"):
    names = " ".join(f'feature_names: "{n}"' for n in features)
    return f'  feature_groups: {{ group_name: "{name}" {names} wide_deep: {kind} }}'


# Each model type and the labels it learns.
MODELS = {
    "MultiTower": ("clk",), "WideAndDeep": ("clk",), "DSSM": ("clk",), "MMoE": ("clk", "buy"),
}

MODEL_CONFIGS = {
    "MultiTower": "\n".join([
        '  model_class: "MultiTower"', group("user", USER), group("item", ITEM + NUMBERS),
        """  multi_tower {
    towers { input: "user" dnn { hidden_units: [32, 16] } }
    towers { input: "item" dnn { hidden_units: [32, 16] } }
    final_dnn { hidden_units: [16, 8] }
    l2_regularization: 1e-6
  }
  embedding_regularization: 1e-6"""]),
    "WideAndDeep": "\n".join([
        '  model_class: "WideAndDeep"', group("deep", USER + ITEM + NUMBERS), group("wide", USER + ITEM, "WIDE"),
        """  wide_and_deep {
    dnn { hidden_units: [32, 16] }
    l2_regularization: 1e-5
  }
  embedding_regularization: 1e-7"""]),
    "DSSM": "\n".join([
        '  model_class: "DSSM"', group("user", USER), group("item", ITEM + NUMBERS),
        """  dssm {
    user_tower { id: "user_id" dnn { hidden_units: [32, 16] } }
    item_tower { id: "item_id" dnn { hidden_units: [32, 16] } }
    simi_func: INNER_PRODUCT
    l2_regularization: 1e-6
  }
  embedding_regularization: 5e-5"""]),
    "MMoE": "\n".join([
        '  model_class: "MMoE"', group("all", USER + ITEM + NUMBERS),
        """  mmoe {
    expert_dnn { hidden_units: [32, 16] }
    num_expert: 3
    task_towers {
      tower_name: "ctr" label_name: "clk" dnn { hidden_units: [16, 8] }
      num_class: 1 weight: 1.0 loss_type: CLASSIFICATION metrics_set: { auc {} }
    }
    task_towers {
      tower_name: "cvr" label_name: "buy" dnn { hidden_units: [16, 8] }
      num_class: 1 weight: 1.0 loss_type: CLASSIFICATION metrics_set: { auc {} }
    }
    l2_regularization: 1e-6
  }
  embedding_regularization: 5e-5"""]),
}


def write_data(path, rows, seed):
    rng = np.random.RandomState(seed)
    users, ages = rng.randint(0, 40, size=rows), rng.randint(0, 6, size=rows)
    items, cates = rng.randint(0, 60, size=rows), rng.randint(0, 8, size=rows)
    numbers = rng.normal(size=(rows, len(NUMBERS)))
    # A click when the user's group and the item's category agree, or on a cheap item; a buy is a likely click.
    logit = 1.8 * ((users % 4) == (cates % 4)) + 0.8 * (ages >= 3) - 0.9 * numbers[:, 0] - 0.8
    clicks = (logit + 0.5 * rng.normal(size=rows) > 0).astype(int)
    buys = clicks * (numbers[:, 1] + 0.5 * rng.normal(size=rows) > 0.3).astype(int)
    lines = []
    with open(path, "w") as f:
        for row in zip(clicks, buys, users, ages, items, cates, numbers[:, 0], numbers[:, 1]):
            values = [str(row[0]), str(row[1]), f"u{row[2]}", f"a{row[3]}", f"i{row[4]}", f"c{row[5]}",
                      f"{row[6]:.4f}", f"{row[7]:.4f}"]
            f.write(",".join(values) + "\n")
            lines.append(",".join(values[2:]))
    return lines


def run(model, work, train, evaluation, eval_rows):
    model_dir = os.path.join(work, model)
    fields = "\n".join(
        [f'  input_fields: {{ input_name: "{n}" input_type: INT64 default_val: "0" }}' for n in LABELS]
        + [f'  input_fields: {{ input_name: "{n}" input_type: STRING default_val: "" }}' for n in USER + ITEM]
        + [f'  input_fields: {{ input_name: "{n}" input_type: DOUBLE default_val: "0" }}' for n in NUMBERS])
    features = "\n".join(
        [f'  features: {{ input_names: "{n}" feature_type: IdFeature embedding_dim: 8 hash_bucket_size: 80 }}'
         for n in USER + ITEM]
        + [f'  features: {{ input_names: "{n}" feature_type: RawFeature boundaries: [-1.0, -0.3, 0.0, 0.3, 1.0] '
           f'embedding_dim: 8 }}' for n in NUMBERS])
    config_path = os.path.join(work, f"{model}.config")
    with open(config_path, "w") as f:
        f.write(PIPELINE % {"train": train, "eval": evaluation, "model_dir": model_dir, "steps": STEPS,
                            "fields": fields, "features": features, "model": MODEL_CONFIGS[model],
                            "labels": "\n".join(f'  label_fields: "{n}"' for n in MODELS[model])})
    easy_rec_main.train_and_evaluate(config_path)
    metrics = easy_rec_main.evaluate(config_path)
    export_dir = easy_rec_main.export(os.path.join(work, f"{model}_export"), config_path)
    export_dir = export_dir.decode() if isinstance(export_dir, bytes) else export_dir
    predictor = Predictor(export_dir)
    # export_config's multi_placeholder: false and filter_inputs: true: one string per example, the input fields its
    # features read joined as in the CSV.
    outputs = predictor.predict(eval_rows[:16], batch_size=16)
    return {
        "metrics": {k: float(v) for k, v in metrics.items()},
        "checkpoints": sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(model_dir)
                              if name.startswith("model.ckpt-") and name.endswith(".index")),
        "output_keys": sorted(outputs[0]),
        "output_types": {k: [np.asarray(v).dtype.kind, list(np.asarray(v).shape)]
                         for k, v in sorted(outputs[0].items())},
        "input_names": sorted(predictor.input_names),
        # The probabilities of each task (DSSM's embeddings and tower features are served as strings).
        "probs": {k: [round(float(np.asarray(out[k]).reshape(-1)[0]), 4) for out in outputs]
                  for k in sorted(outputs[0]) if k.startswith("probs")},
    }


def main(model_dir):
    work = os.path.dirname(model_dir.rstrip("/"))
    os.makedirs(work, exist_ok=True)
    train, evaluation = os.path.join(work, "train.csv"), os.path.join(work, "eval.csv")
    write_data(train, 4000, 0)
    eval_rows = write_data(evaluation, 1000, 1)
    tf.compat.v1.set_random_seed(5)
    results = {model: run(model, work, train, evaluation, eval_rows) for model in MODELS}
    print("RESULT " + json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

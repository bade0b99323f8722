"""EasyRec's documented path: a pipeline config (a DeepFM over a CSV of ids and numbers, written here as its docs
write one) run by `easy_rec.python.main`: `train_and_evaluate`, `evaluate`, `export`, then EasyRec's own `Predictor`
on the export. Prints `RESULT {json}`.

EasyRec 0.7.1 reaches into tf.estimator's private modules (`training._TrainingExecutor`, `exporter`, `gc`,
`util`, `estimator_export`) and TensorFlow's removed `distribute.estimator_training`. It also needs user fixes on
TensorFlow 2.15 itself (not tf.estimator's), marked below: pure-Python protobuf for its generated protos
(PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, set by whoever runs this), and TensorFlow internals that moved.
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

IDS = ["c1", "c2", "c3"]
NUMBERS = ["x1", "x2"]

CONFIG = """
train_input_path: "%(train)s"
eval_input_path: "%(eval)s"
model_dir: "%(model_dir)s"
train_config {
  log_step_count_steps: 50
  optimizer_config: {
    adam_optimizer: { learning_rate: { constant_learning_rate { learning_rate: 0.005 } } }
    use_moving_average: false
  }
  save_checkpoints_steps: 100
  num_steps: 300
}
eval_config { metrics_set: { auc {} } }
data_config {
  separator: ","
  input_fields: { input_name: "label" input_type: INT64 default_val: "0" }
%(fields)s
  label_fields: "label"
  batch_size: 128
  num_epochs: 1000
  prefetch_size: 4
  input_type: CSVInput
}
feature_config: {
%(features)s
}
model_config: {
  model_class: "DeepFM"
  feature_groups: { group_name: "deep" %(all_names)s wide_deep: DEEP }
  feature_groups: { group_name: "wide" %(id_names)s wide_deep: WIDE }
  deepfm {
    wide_output_dim: 8
    dnn { hidden_units: [32, 16] }
    final_dnn { hidden_units: [16] }
    l2_regularization: 1e-5
  }
  embedding_regularization: 1e-7
}
export_config { multi_placeholder: false }
"""


def write_data(path, rows, seed):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, 20, size=(rows, len(IDS)))
    numbers = rng.normal(size=(rows, len(NUMBERS)))
    logit = (ids[:, 0] % 2) * 1.5 - (ids[:, 1] % 3 == 0) * 1.0 + numbers[:, 0] - 0.5
    labels = (logit + 0.3 * rng.normal(size=rows) > 0).astype(int)
    with open(path, "w") as f:
        for label, row_ids, row_numbers in zip(labels, ids, numbers):
            f.write(",".join([str(label)] + [f"id{v}" for v in row_ids] + [f"{v:.4f}" for v in row_numbers]) + "\n")
    return ids, numbers


def main(model_dir):
    work = os.path.dirname(model_dir.rstrip("/"))
    train, evaluation = os.path.join(work, "train.csv"), os.path.join(work, "eval.csv")
    write_data(train, 4000, 0)
    eval_ids, eval_numbers = write_data(evaluation, 1000, 1)
    fields = "\n".join([f'  input_fields: {{ input_name: "{n}" input_type: STRING default_val: "" }}' for n in IDS]
                       + [f'  input_fields: {{ input_name: "{n}" input_type: DOUBLE default_val: "0" }}'
                          for n in NUMBERS])
    features = "\n".join(
        [f'  features: {{ input_names: "{n}" feature_type: IdFeature embedding_dim: 8 hash_bucket_size: 50 }}'
         for n in IDS] + [f'  features: {{ input_names: "{n}" feature_type: RawFeature boundaries: [-1.0, -0.3, 0.0, 0.3, 1.0] '
                                 f'embedding_dim: 8 }}' for n in NUMBERS])
    config_path = os.path.join(work, "deepfm.config")
    with open(config_path, "w") as f:
        f.write(CONFIG % {"train": train, "eval": evaluation, "model_dir": model_dir, "fields": fields,
                          "features": features,
                          "all_names": " ".join(f'feature_names: "{n}"' for n in IDS + NUMBERS),
                          "id_names": " ".join(f'feature_names: "{n}"' for n in IDS)})
    tf.compat.v1.set_random_seed(5)
    easy_rec_main.train_and_evaluate(config_path)
    metrics = easy_rec_main.evaluate(config_path)
    export_dir = easy_rec_main.export(os.path.join(work, "export"), config_path)
    export_dir = export_dir.decode() if isinstance(export_dir, bytes) else export_dir
    predictor = Predictor(export_dir)
    # export_config's multi_placeholder: false: one string per example, its input fields joined as in the CSV.
    rows = [",".join([f"id{v}" for v in row_ids] + [f"{v:.4f}" for v in row_numbers])
            for row_ids, row_numbers in zip(eval_ids[:16], eval_numbers[:16])]
    outputs = predictor.predict(rows, batch_size=16)
    probs = [float(np.asarray(out["probs"]).reshape(-1)[0]) for out in outputs]
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "checkpoints": sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(model_dir)
                              if name.startswith("model.ckpt-") and name.endswith(".index")),
        "output_keys": sorted(outputs[0]),
        "input_names": sorted(predictor.input_names),
        "probs": [round(p, 4) for p in probs],
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

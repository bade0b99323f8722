"""The job `scale_curves.py` runs with `elastimator run`: DeepFM over the Criteo-shaped file in SCALE_DATA, one
epoch, batch 512, no evaluation."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import deepfm  # noqa: E402
import generate_data  # noqa: E402
from elastimator import FileReader  # noqa: E402


class ScaleConf:
    classifier_class = deepfm.criteo_model_fn
    model_dir = os.environ.get("SCALE_MODEL_DIR", "/tmp/scale-model")
    batch_size = 512
    epoch = 1
    tf_random_seed = 1
    save_steps = 100_000  # the first and the last checkpoint, as a long job would have
    log_steps = int(os.environ.get("SCALE_LOG_STEPS", "100"))  # global_step/sec, the throughput the benchmark reads
    train_set = {"reader": FileReader(os.environ.get("SCALE_DATA", "/tmp/scale.tsv"), field_delim="\t"),
                 "columns": generate_data.columns()}

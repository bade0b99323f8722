"""One role of a small parameter-server job on iris; the role comes from TF_CONFIG.

Usage: python distributed_job.py MODEL_DIR MAX_STEPS [--early-stop] [--steps-per-execution=N] [--both-train]
                                  [--v1-ps-strategy]
--v1-ps-strategy passes tf.compat.v1.distribute.experimental.ParameterServerStrategy() as train_distribute, as
tf.estimator 2.15's parameter-server programs could.

--both-train holds the chief at its first step until the worker has trained one, so that both trainers advance
the shared global step however late the worker's process starts on a busy machine.
"""

import json
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402

import elastimator as est  # noqa: E402
from tests.helpers import linear_model_fn  # noqa: E402

WORKER_TRAINED = "worker_trained"


class BothTrainHook(tf.compat.v1.train.SessionRunHook):
    """The worker marks its first trained step in MODEL_DIR; the chief waits for that mark before its first step.
    Each trainer counts its own training calls for the RESULT line."""

    def __init__(self, model_dir: str, task_type: str, timeout_secs: float = 180.0):
        self.mark = os.path.join(model_dir, WORKER_TRAINED)
        self.task_type, self.timeout_secs, self.calls = task_type, timeout_secs, 0

    def before_run(self, run_context):
        if self.task_type == "chief" and self.calls == 0:
            deadline = time.monotonic() + self.timeout_secs
            while not os.path.exists(self.mark):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the worker trained no step in {self.timeout_secs:.0f}s")
                time.sleep(0.05)

    def after_run(self, run_context, run_values):
        self.calls += 1
        if self.task_type == "worker" and self.calls == 1:
            open(self.mark, "w").close()


def main(model_dir: str, max_steps: int, early_stop: bool, steps_per_execution: int, both_train: bool,
         v1_ps_strategy: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s: %(message)s")
    x, y = load_iris(return_X_y=True)
    x, y = x.astype(np.float32), y.astype(np.int32)
    estimator = est.Estimator(
        linear_model_fn, model_dir=model_dir, params={"n_classes": 3},
        config=est.RunConfig(save_checkpoints_steps=25, keep_checkpoint_max=1, log_step_count_steps=50,
                             steps_per_execution=steps_per_execution,
                             train_distribute=tf.compat.v1.distribute.experimental.ParameterServerStrategy()
                             if v1_ps_strategy else None),
    )
    hooks = []
    both = BothTrainHook(model_dir, estimator.config.task_type) if both_train else None
    if both:
        hooks.append(both)
    if early_stop:
        hooks.append(est.stop_if_lower_hook(estimator, "loss", threshold=100.0, run_every_secs=None,
                                            run_every_steps=5))
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": x[:1]})
    train_spec = est.TrainSpec(
        est.inputs.numpy_input_fn({"x": x}, y, batch_size=32, num_epochs=None, shuffle=True),
        max_steps=max_steps, hooks=hooks)
    eval_spec = est.EvalSpec(
        est.inputs.numpy_input_fn({"x": x}, y, batch_size=50, num_epochs=1, shuffle=False), steps=None,
        start_delay_secs=0, throttle_secs=0,
        exporters=[est.FinalExporter("final", receiver), est.BestExporter("best", receiver)])
    metrics, exports = est.train_and_evaluate(estimator, train_spec, eval_spec)
    # Metrics are numpy scalars, as tf.estimator returned them.
    print("RESULT " + json.dumps({"role": estimator.config.task_type, "metrics": metrics,
                                  "exports": [p.decode() for p in exports], "training_calls": both.calls if both else None},
                                 default=lambda v: v.item()), flush=True)


if __name__ == "__main__":
    options = sys.argv[3:]
    steps = next((int(o.split("=", 1)[1]) for o in options if o.startswith("--steps-per-execution=")), 1)
    main(sys.argv[1], int(sys.argv[2]), "--early-stop" in options, steps, "--both-train" in options,
         "--v1-ps-strategy" in options)

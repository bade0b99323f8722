"""Runs TensorFlow's "Multi-worker training with Estimator" tutorial (../public/multi_worker_with_estimator.py,
its code cells as published, Apache-2.0) as the tutorial says to: two worker processes, each with its own
TF_CONFIG. The one cell the tutorial asks each worker to adapt is set per worker (the task index, and free
ports instead of 12345 and 23456), and its model_dir '/tmp/multiworker' is this run's; the rest runs unedited.
The MNIST data set cannot be downloaded here: `tensorflow_datasets.load` gives MNIST-shaped images made here
(a bright patch whose place is the digit).

Usage: multi_worker_tutorial.py MODEL_DIR            runs worker 1 in a child process and worker 0 here
       multi_worker_tutorial.py MODEL_DIR PORT PORT I  runs worker I
Prints `RESULT {json}` (worker 0): the checkpoints' steps, the evaluation's summaries, worker 1's exit code.
"""
import glob
import json
import os
import random
import re
import socket
import subprocess
import sys
import types

import numpy as np
import tensorflow as tf

PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "public",
                       "multi_worker_with_estimator.py")
TRAIN, TEST = 1280, 256


def _images(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(10, size=count).astype("int64")
    images = rng.randint(0, 40, size=(count, 28, 28, 1)).astype("uint8")
    for image, label in zip(images, labels):
        row, col = (label // 5) * 14 + 4, (label % 5) * 5 + 1
        image[row:row + 6, col:col + 5] = 250
    return tf.data.Dataset.from_tensor_slices((images, labels))


def _fake_tensorflow_datasets():
    module = types.ModuleType("tensorflow_datasets")

    def load(name, with_info=False, as_supervised=False):
        assert (name, with_info, as_supervised) == ("mnist", True, True)
        return {"train": _images(TRAIN, 0), "test": _images(TEST, 1)}, {"name": name}

    module.load = load
    sys.modules["tensorflow_datasets"] = module


def _free_ports(count):
    ports = []
    for port in random.sample(range(20000, 32000), 2000):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError("no free ports")


def run_worker(model_dir, ports, index):
    _fake_tensorflow_datasets()
    with open(PROGRAM) as f:
        text = f.read()
    tf_config = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                            "task": {"type": "worker", "index": index}})
    cell = re.search(r"os\.environ\['TF_CONFIG'\] = json\.dumps\(\{.*?\n\}\)", text, flags=re.S).group(0)
    # As many lines as the cell had: AutoGraph reads model_fn's source from the file by its line numbers.
    text = text.replace(cell, f"os.environ['TF_CONFIG'] = {tf_config!r}" + "\n" * cell.count("\n"))
    text = text.replace("'/tmp/multiworker'", repr(model_dir))
    exec(compile(text, PROGRAM, "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used


def main(model_dir):
    ports = _free_ports(2)
    worker = subprocess.Popen([*sys.orig_argv, *map(str, ports), "1"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        run_worker(model_dir, ports, 0)
        _, errors = worker.communicate(timeout=600)
    finally:
        if worker.poll() is None:
            worker.kill()
    if worker.returncode:
        print(errors[-3000:], file=sys.stderr)
    state = tf.train.get_checkpoint_state(model_dir)
    evaluation = {}
    for path in glob.glob(os.path.join(model_dir, "eval", "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    evaluation[value.tag] = [event.step, float(value.simple_value)]
    result = {
        "checkpoints": sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths) if state else [],
        "evaluation": evaluation,
        "worker_1_exit": worker.returncode,
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    if len(sys.argv) == 5:
        run_worker(sys.argv[1], [int(sys.argv[2]), int(sys.argv[3])], int(sys.argv[4]))
    else:
        main(sys.argv[1])

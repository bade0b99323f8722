"""Runs a public TPUEstimator program unedited: tensorflow/tpu's models/official/mnist/mnist_tpu.py (in
../public/, Apache-2.0), with --use_tpu=false, on a small MNIST-shaped data set made here (the real one cannot
be downloaded here): a bright patch whose place is the digit. Prints `RESULT {json}` with what the program
left behind: its checkpoints, its evaluation's summaries and its prediction log lines.
"""
import glob
import json
import logging
import os
import runpy
import sys

import numpy as np
import tensorflow as tf

PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "public", "mnist_tpu.py")


def write_records(path, count, rng):
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            label = int(rng.randint(10))
            image = rng.randint(0, 40, size=(28, 28)).astype("uint8")
            row, col = (label // 5) * 14 + 4, (label % 5) * 5 + 1
            image[row:row + 6, col:col + 5] = 250
            example = tf.train.Example(features=tf.train.Features(feature={
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
            writer.write(example.SerializeToString())


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def main(model_dir):
    data_dir = os.path.join(model_dir, "data")
    os.makedirs(data_dir)
    rng = np.random.RandomState(0)
    for name, count in (("train", 512), ("validation", 128), ("test", 16)):
        write_records(os.path.join(data_dir, f"{name}.tfrecords"), count, rng)
    lines = Lines()
    logging.getLogger("absl").addHandler(lines)
    sys.argv = [PROGRAM, "--use_tpu=false", "--tpu=local", f"--model_dir={model_dir}", f"--data_dir={data_dir}",
                "--batch_size=32", "--train_steps=40", "--eval_steps=4", "--iterations=10", "--learning_rate=0.2"]
    try:
        runpy.run_path(PROGRAM, run_name="__main__")
    except SystemExit as exit_:
        assert not exit_.code, exit_.code
    state = tf.train.get_checkpoint_state(model_dir)
    evaluation = {}
    for path in glob.glob(os.path.join(model_dir, "eval", "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                evaluation[value.tag] = [event.step, float(value.simple_value)]
    predictions = [line for line in lines.lines if line.startswith("Prediction is")]
    result = {
        "checkpoints": sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths),
        "evaluation": evaluation,
        "prediction_lines": len(predictions),
        "predicted_classes": sorted({int(line.split('"')[1]) for line in predictions}),
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

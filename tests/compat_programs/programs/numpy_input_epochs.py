"""Which rows tf.estimator's numpy_input_fn and pandas_input_fn give each step, and how many steps they make:
over one, two and forty epochs of a batch size that does not divide the rows, in order and shuffled, with a
dict or one array for x, labels or none, a DataFrame with a Series or a DataFrame target, forever
(num_epochs=None), two reading threads, a queue smaller than a batch; through train, evaluate and predict, as
TF 1 programs called them. Prints `RESULT {json}`.

Each feature "row" holds its row's number, so the rows a step got are visible to a hook that fetches them.
In order, the rows (and every batch's size) must match exactly; shuffled, how many steps, their sizes and how
often each row came.
"""
import collections
import hashlib
import itertools
import json
import sys

import numpy as np
import pandas as pd
import tensorflow as tf

inputs = tf.compat.v1.estimator.inputs
SEEN = []  # one (rows, labels) pair per session call of the running hook
SHAPES = {}  # per mode: the static shape of the rows and the feature (and label) keys model_fn was given


class Rows(tf.compat.v1.train.SessionRunHook):
    """Fetches the step's rows (and labels) with every step, as a user's debugging hook would."""

    def __init__(self, rows, labels):
        self.fetches = {"rows": rows} if labels is None else {"rows": rows, "labels": labels}

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self.fetches)

    def after_run(self, run_context, run_values):
        SEEN.append(run_values.results)


def model_fn(features, labels, mode, params):
    rows = features["row"] if isinstance(features, dict) else features
    first_label = labels if labels is None or not isinstance(labels, dict) else labels[sorted(labels)[0]]
    SHAPES[mode] = {
        "rows": rows.shape.as_list(),
        "feature_keys": list(features) if isinstance(features, dict) else None,
        "feature_dtypes": {k: v.dtype.name for k, v in features.items()} if isinstance(features, dict) else None,
        "label_keys": list(labels) if isinstance(labels, dict) else None,
    }
    if mode == tf.estimator.ModeKeys.PREDICT:
        size = tf.fill(tf.shape(rows), tf.shape(rows)[0])
        return tf.estimator.EstimatorSpec(mode, predictions={"row": rows, "batch_size": size})
    weight = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.square(weight - tf.reduce_mean(tf.cast(rows, tf.float32)))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    hooks = [Rows(rows, first_label)] if params["watch"] else []
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks,
                                      evaluation_hooks=hooks)


def summary(batches, labels_times=None, shows="rows"):
    """Steps and batch sizes (as [size, how many in a row]); with shows="counts" also how often each row came;
    with "rows" the rows themselves too (listed when few, as "0,1,2,3 4,5,6,7 ...", else a digest of their
    sequence). Shuffled, 2.15's rows differ from run to run; forever and shuffled, even how often each row
    came (its queue sampled a window of a thousand rows, several copies of each of these few)."""
    sizes = [len(rows) for rows in batches]
    stream = np.concatenate([np.asarray(rows, np.int64).reshape(-1) for rows in batches])
    result = {"steps": len(batches), "sizes": [[size, len(list(run))] for size, run in itertools.groupby(sizes)]}
    if shows in ("rows", "counts"):
        result["times_each_row_came"] = sorted(set(collections.Counter(stream.tolist()).values()))
    if shows == "rows" and len(stream) <= 64:
        result["rows"] = " ".join(",".join(str(int(r)) for r in np.asarray(rows).reshape(-1)) for rows in batches)
    elif shows == "rows":
        result["rows_sha1"] = hashlib.sha1(stream.tobytes()).hexdigest()[:16]
    if labels_times is not None:
        result["labels_follow_rows"] = all(
            np.array_equal(np.asarray(b["labels"]), np.asarray(b["rows"]) * labels_times) for b in SEEN)
    return result


def estimator(model_dir, watch=True):
    config = tf.estimator.RunConfig(tf_random_seed=3, log_step_count_steps=10000)
    return tf.estimator.Estimator(model_fn, model_dir=model_dir, params={"watch": watch}, config=config)


def trained(model_dir, input_fn, steps=None, watch=True, labels_times=None, shows="rows"):
    SEEN.clear()
    e = estimator(model_dir, watch)
    e.train(input_fn, steps=steps)
    result = summary([b["rows"] for b in SEEN], labels_times, shows) if watch else {}
    result["global_step"] = int(e.get_variable_value("global_step"))
    result["checkpoint"] = tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1]
    result["train_rows_shape"] = SHAPES[tf.estimator.ModeKeys.TRAIN]["rows"]
    return result


def evaluated(model_dir, input_fn):
    SEEN.clear()
    e = estimator(model_dir)
    e.train(input_fn, steps=1)
    SEEN.clear()
    metrics = e.evaluate(input_fn)
    result = summary([b["rows"] for b in SEEN])
    result["eval_rows_shape"] = SHAPES[tf.estimator.ModeKeys.EVAL]["rows"]
    result["metric_keys"] = sorted(metrics)
    return result


def predicted(model_dir, input_fn, take=None):
    e = estimator(model_dir, watch=False)
    e.train(input_fn, steps=1)
    predictions = list(itertools.islice(e.predict(input_fn), take))
    # Rows back into their batches: each prediction carries the size of the batch it came in.
    batches, at = [], 0
    while at < len(predictions):
        size = int(predictions[at]["batch_size"])
        batches.append([int(p["row"]) for p in predictions[at:at + size]])
        at += size
    result = summary(batches)
    result["predictions"] = len(predictions)
    result["predict_rows_shape"] = SHAPES[tf.estimator.ModeKeys.PREDICT]["rows"]
    return result


def main(root):
    result = {}
    big = np.arange(800, dtype=np.int64)
    x_big = {"row": big, "value": big.astype(np.float32) * 0.5}
    for epochs in (1, 2, 40):
        watch = epochs < 40  # forty epochs: the step count alone, at the speed several steps per call allow
        for shuffle in (False, True):
            name = f"numpy_800_rows_batch_64_epochs_{epochs}_{'shuffled' if shuffle else 'in_order'}"
            result[name] = trained(f"{root}/{name}", inputs.numpy_input_fn(
                x_big, big * 10, batch_size=64, num_epochs=epochs, shuffle=shuffle), watch=watch,
                labels_times=10 if watch else None, shows="counts" if shuffle else "rows")
    result["evaluate_800_rows_batch_64_epochs_2"] = evaluated(f"{root}/evaluate_800", inputs.numpy_input_fn(
        x_big, big * 10, batch_size=64, num_epochs=2, shuffle=False))
    result["predict_800_rows_batch_64_epochs_2"] = predicted(f"{root}/predict_800", inputs.numpy_input_fn(
        x_big, big * 10, batch_size=64, num_epochs=2, shuffle=False))

    small = np.arange(10, dtype=np.int64)
    x_small = {"row": small, "b": small * 2, "a": small.astype(np.float64)}  # keys not in sorted order
    for epochs in (1, 2, 3):
        name = f"numpy_10_rows_batch_4_epochs_{epochs}"
        result[name] = trained(f"{root}/{name}", inputs.numpy_input_fn(
            x_small, small * 10, batch_size=4, num_epochs=epochs, shuffle=False), labels_times=10)
    result["numpy_10_rows_batch_4_feature_keys"] = SHAPES[tf.estimator.ModeKeys.TRAIN]["feature_keys"]
    result["numpy_10_rows_batch_4_forever_7_steps"] = trained(f"{root}/forever", inputs.numpy_input_fn(
        x_small, small * 10, batch_size=4, num_epochs=None, shuffle=False), steps=7, labels_times=10)
    result["numpy_10_rows_batch_4_forever_shuffled_7_steps"] = trained(
        f"{root}/forever_shuffled", inputs.numpy_input_fn(x_small, small * 10, batch_size=4, num_epochs=None,
                                                          shuffle=True), steps=7, shows="steps")
    result["numpy_10_rows_batch_4_epochs_3_shuffled"] = trained(f"{root}/shuffled_3", inputs.numpy_input_fn(
        x_small, small * 10, batch_size=4, num_epochs=3, shuffle=True), labels_times=10, shows="counts")
    result["numpy_label_dict"] = trained(f"{root}/label_dict", inputs.numpy_input_fn(
        {"row": small}, {"u": small * 3, "t": small * 10}, batch_size=4, num_epochs=2, shuffle=False),
        labels_times=10)
    result["numpy_label_dict_keys"] = SHAPES[tf.estimator.ModeKeys.TRAIN]["label_keys"]
    result["numpy_one_array_no_labels"] = trained(f"{root}/one_array", inputs.numpy_input_fn(
        small, batch_size=4, num_epochs=2, shuffle=False))
    result["predict_one_array_epochs_2"] = predicted(f"{root}/predict_one_array", inputs.numpy_input_fn(
        small, batch_size=4, num_epochs=2, shuffle=False))
    result["predict_forever_first_7"] = predicted(f"{root}/predict_forever", inputs.numpy_input_fn(
        small, batch_size=4, num_epochs=None, shuffle=False), take=7)
    # Two threads interleave their batches as they run: how many, and how often each row came.
    result["numpy_two_threads_epochs_1"] = trained(f"{root}/two_threads", inputs.numpy_input_fn(
        x_small, small * 10, batch_size=4, num_epochs=1, shuffle=False, num_threads=2), shows="counts")
    result["numpy_queue_smaller_than_a_batch"] = trained(f"{root}/small_queue", inputs.numpy_input_fn(
        x_small, small * 10, batch_size=4, num_epochs=2, shuffle=False, queue_capacity=3), labels_times=10)

    frame = pd.DataFrame({"value": small * 0.5, "city": [f"c{i}" for i in small], "row": small},
                         index=np.arange(100, 110))
    target = pd.Series(small * 10, index=frame.index)
    result["pandas_series_target_epochs_2"] = trained(f"{root}/pandas", inputs.pandas_input_fn(
        frame, target, batch_size=4, num_epochs=2, shuffle=False), labels_times=10)
    result["pandas_features"] = SHAPES[tf.estimator.ModeKeys.TRAIN]
    targets = pd.DataFrame({"u": small * 3, "t": small * 10}, index=frame.index)
    result["pandas_frame_target_epochs_3"] = trained(f"{root}/pandas_frame", inputs.pandas_input_fn(
        frame, targets, batch_size=4, num_epochs=3, shuffle=False), labels_times=10)
    result["pandas_frame_target_label_keys"] = SHAPES[tf.estimator.ModeKeys.TRAIN]["label_keys"]
    result["pandas_shuffled_epochs_2"] = trained(f"{root}/pandas_shuffled", inputs.pandas_input_fn(
        frame, target, batch_size=4, num_epochs=2, shuffle=True), labels_times=10, shows="counts")
    result["pandas_forever_7_steps"] = trained(f"{root}/pandas_forever", inputs.pandas_input_fn(
        frame, target, batch_size=4, num_epochs=None, shuffle=False), steps=7, labels_times=10)
    result["pandas_no_target_predict_epochs_2"] = predicted(f"{root}/pandas_predict", inputs.pandas_input_fn(
        frame, batch_size=4, num_epochs=2, shuffle=False))
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])

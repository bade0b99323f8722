"""The executor in-process (the DLRover adaptor pattern, a job without eval_set) and the progress display."""

import io
import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import Column, ElasticReader
from elastimator.estimator.step.training_step import StepHook, TrainingStep
from elastimator.job.conf import JobConf
from elastimator.job.executor import run_job
from elastimator.job.metrics_chart import readable_limits, smoothed, title
from elastimator.job.progress import ProgressHook, format_duration, progress_line
from tests.helpers import linear_model_fn, read_events

COLUMNS = [Column.create(n, "float32") for n in "abcd"] + [Column.create("species", "int", is_label=True)]


class IrisReader(ElasticReader):
    def __init__(self):
        super().__init__(path="iris")
        from sklearn.datasets import load_iris

        x, y = load_iris(return_X_y=True)
        self.lines = [",".join(map(str, row)) + f",{label}" for row, label in zip(x, y)]

    def count_data(self):
        return len(self.lines)

    def read_data_by_index_range(self, start_index, end_index):
        return self.lines[start_index:end_index]


def inner_model_fn(features, labels, mode, config):
    """A 'pre-made' model_fn with the (features, labels, mode, config) signature canned estimators have."""
    stacked = tf.stack([features[n] for n in "abcd"], axis=1)
    return linear_model_fn({"x": stacked}, labels, mode, {"n_classes": 3})


class Adaptor(est.Estimator):
    """Seed 001's pattern: an Estimator subclass whose model_fn wraps another estimator's."""

    def model_fn(self, features, labels, mode, params):
        self.inner = est.Estimator(inner_model_fn, model_dir=self.model_dir)
        return self.inner._model_fn(features, labels, mode, self.run_config)


def test_adaptor_conf_trains_evaluates_and_exports(tmp_path):
    conf = JobConf.from_object({
        "classifier_class": Adaptor, "model_dir": str(tmp_path), "params": {"task": "multiclass"},
        "max_steps": 200, "save_steps": 100, "batch_size": 30, "tf_random_seed": 7,
        "train_set": {"reader": IrisReader(), "columns": COLUMNS, "epoch": None, "shuffle": True},
        "eval_set": {"reader": IrisReader(), "columns": COLUMNS},
        "exporter": {"type": "best", "exports_to_keep": 1},
    })
    result = run_job(conf, show_progress=False)
    assert result.global_step == 200 and result.metrics["accuracy"] > 0.8
    assert len(result.exports) == 1 and os.path.isdir(result.exports[0])
    assert result.bad_records == {"train_set": 0, "eval_set": 0}


def test_job_without_eval_set_trains_then_exports(tmp_path):
    conf = JobConf.from_object({
        "classifier_class": inner_model_fn, "model_dir": str(tmp_path), "batch_size": 50,
        "train_set": {"reader": IrisReader(), "columns": COLUMNS, "epoch": 2},
    })
    result = run_job(conf, show_progress=False)
    assert result.global_step == 6 and result.metrics is None  # 150 records / 50, twice
    served = tf.saved_model.load(result.exports[0]).signatures["serving_default"]
    assert sorted(served.structured_input_signature[1]) == ["a", "b", "c", "d"]  # never the label
    out = served(a=tf.constant([5.1]), b=tf.constant([3.5]), c=tf.constant([1.4]), d=tf.constant([0.2]))
    assert out["probabilities"].shape == (1, 3)


def test_progress_line():
    line = progress_line(1200, 5000, 80.0, 0.41234)
    assert line.startswith("step 1200/5000 [#####") and "24%" in line
    assert "80.0 steps/s" in line and "loss 0.4123" in line and "ETA 0:00:47" in line
    assert progress_line(10, None, 5.0, None) == "step 10 5.0 steps/s"
    assert format_duration(3725) == "1:02:05"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_redraws_in_place_on_a_terminal(tmp_path):
    x = np.random.rand(64, 4).astype(np.float32)
    y = np.random.randint(0, 3, 64).astype(np.int32)
    terminal, log = _Terminal(), io.StringIO()
    estimator = est.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"n_classes": 3})
    estimator.train(est.inputs.numpy_input_fn({"x": x}, y, batch_size=8, num_epochs=None, shuffle=True), steps=20,
                    hooks=[StepHook(lambda step: ProgressHook(step, 20, stream=terminal)),
                           StepHook(lambda step: ProgressHook(step, 20, stream=log, every_secs=0))])
    assert terminal.getvalue().startswith("\r") and terminal.getvalue().endswith("\n")
    assert "step 20/20" in terminal.getvalue()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and lines[-1].startswith("step 20/20") and "loss" in lines[-1]


def test_training_loss_is_written_every_20_steps_unless_the_conf_says_otherwise(tmp_path):
    """`report` and TensorBoard get a curve: log_steps=200 used to leave 16 points over 3,000 steps."""
    base = {"classifier_class": inner_model_fn, "batch_size": 30, "max_steps": 100, "log_steps": 200,
            "train_set": {"reader": IrisReader(), "columns": COLUMNS, "epoch": None}}
    run_job(JobConf.from_object({**base, "model_dir": str(tmp_path / "default")}), show_progress=False)
    steps = [step for step, _ in read_events(str(tmp_path / "default"))["loss"]]
    # One step per call: TensorFlow's SummarySaverHook (1, 21, ...); several (the default for this job): calls
    # end on the multiples of 20, and the first call writes too.
    assert steps in (list(range(1, 101, 20)), list(range(0, 101, 20)), [1] + list(range(20, 101, 20))), steps
    run_job(JobConf.from_object({**base, "model_dir": str(tmp_path / "set"), "summary_steps": 50}),
            show_progress=False)
    assert len(read_events(str(tmp_path / "set"))["loss"]) < len(steps)


def test_report_axes_do_not_magnify_noise():
    assert readable_limits([0.845, 0.850]) == pytest.approx((0.7925, 0.9025))  # not a cliff
    assert readable_limits([0.99, 1.0]) == pytest.approx((0.89, 1.0))  # stays within [0, 1]
    low, high = readable_limits([100.0, 101.0])
    assert high - low == pytest.approx(1.1 * 10.1)  # 10% of the largest value, padded by 10%


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _call(hook, clock, step, secs, loss=0.5):
    clock.now += secs
    hook.after_run(None, type("RunValues", (), {"results": {"step": step, "loss": loss}})())


def _drain(master):
    """All a closed pty's terminal wrote: one read returns only what the line discipline has passed on so far."""
    import os  # pylint: disable=import-outside-toplevel

    chunks = []
    try:
        while chunk := os.read(master, 1 << 16):
            chunks.append(chunk)
    except OSError:  # EIO: the terminal side is closed and everything it wrote has been read
        pass
    finally:
        os.close(master)
    return b"".join(chunks)


def test_a_log_line_on_the_progress_bars_terminal_starts_on_a_line_of_its_own():
    """`... ETA 0:00:402026-11-26 11:48:51,337 INFO step 200: loss = 0.33` was what a newcomer saw (a pty)."""
    import logging  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel
    import pty  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w")
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger("elastimator")
    log.addHandler(handler)
    clock = _Clock()
    hook = ProgressHook(TrainingStep(loss=None, global_step=None, outputs={}), 100, stream=terminal, clock=clock)
    try:
        hook.begin()
        for step in range(1, 41):
            _call(hook, clock, step, 0.3)
            if step % 10 == 0:
                log.warning("step %d: loss = 0.33", step)
        hook.end(None)
    finally:
        log.removeHandler(handler)
        terminal.close()
    output = _drain(master).decode()
    assert output.count("WARNING step") == 4 and "ETA" in output
    assert not re.search(r"ETA \d+:\d\d:\d\d(?!\x1b\[K)", output)  # the bar's line always ends cleared ...
    assert all(output[i - 4:i] == "\r\x1b[K" or output[i - 1] == "\n"  # ... and each record starts afresh
               for i in (m.start() for m in re.finditer("WARNING step", output)))


def test_steps_per_second_and_eta_come_from_the_recent_pace_not_the_slow_start():
    clock = _Clock()
    stream = io.StringIO()
    hook = ProgressHook(TrainingStep(loss=None, global_step=None, outputs={}), 10_000, stream=stream,
                        every_secs=0, clock=clock)
    _call(hook, clock, 1, 60.0)  # building and warming up
    for step in range(2, 6):
        _call(hook, clock, step, 10.0)  # the first calls, still slow
    for step in range(105, 3106, 100):
        _call(hook, clock, step, 1.0)  # then 100 steps/s for 30 s
    assert "100.0 steps/s" in hook.last_line and "ETA 0:01:08" in hook.last_line  # 6,895 steps left at 100/s


def test_a_pause_before_the_last_call_does_not_read_as_a_slow_pace():
    """A 40 steps/s run whose final checkpoint was evaluated before its last call: its last frame read 1.0 steps/s."""
    clock = _Clock()
    stream = io.StringIO()
    hook = ProgressHook(TrainingStep(loss=None, global_step=None, outputs={}), 1000, stream=stream, clock=clock)
    for step in range(10, 991, 10):
        _call(hook, clock, step, 0.25)  # 40 steps/s
    _call(hook, clock, 1000, 30.25)  # an evaluation ran between the last two calls
    hook.end(None)
    assert "40.0 steps/s" in hook.last_line and hook.last_line.startswith("step 1000/1000")


def test_piped_the_first_line_waits_for_a_measured_pace():
    """Piped, the first line read `step 2/3000 ... ETA 0:46:55` for a 35 s run."""
    clock = _Clock()
    stream = io.StringIO()
    hook = ProgressHook(TrainingStep(loss=None, global_step=None, outputs={}), 3000, stream=stream, every_secs=10.0,
                        clock=clock)
    _call(hook, clock, 1, 3.0)  # building, warming up
    _call(hook, clock, 2, 1.0)  # a step after the first checkpoint
    for step in range(102, 3002, 100):
        _call(hook, clock, step, 1.1)  # about 91 steps/s
    first = stream.getvalue().splitlines()[0]
    assert first.startswith("step 9") and "90.9 steps/s" in first, first
    assert "ETA 0:00:2" in first or "ETA 0:00:1" in first, first


def test_no_pace_is_shown_before_it_is_measured():
    assert progress_line(2, 3000, None, 0.5) == "step 2/3000 [........................]   0% loss 0.5000"


def test_without_a_terminal_the_last_line_is_written_once():
    clock = _Clock()
    stream = io.StringIO()
    hook = ProgressHook(TrainingStep(loss=None, global_step=None, outputs={}), 20, stream=stream, every_secs=0,
                        clock=clock)
    for step in range(1, 21):
        _call(hook, clock, step, 0.1)
    hook.end(None)
    assert [line for line in stream.getvalue().splitlines() if line.startswith("step 20/20")] != []
    assert len([line for line in stream.getvalue().splitlines() if line.startswith("step 20/20")]) == 1


def test_the_report_smooths_the_training_loss_and_titles_the_chart_by_name():
    noisy = [1.0, 0.0] * 100
    curve = smoothed(noisy)  # over 10 points (a twentieth of 200), centered
    assert max(abs(v - 0.5) for v in curve[10:-10]) < 0.1  # the trend, not the batch-to-batch swing
    ramp = [float(i) for i in range(200)]
    assert smoothed(ramp)[100] == pytest.approx(100.0)  # centered: no lag behind a falling or rising loss
    assert smoothed([2.0, 2.0, 2.0]) == pytest.approx([2.0, 2.0, 2.0])
    assert title("/some/where/census_model/", 3002) == "census_model: 3,002 steps"


def test_the_summary_says_how_bad_records_and_empty_fields_are_counted():
    """One bad line in a file read 12 times read `bad records 1` beside `empty fields filled age: 12`."""
    from elastimator.job import data_quality  # pylint: disable=import-outside-toplevel

    assert data_quality.rows({"train_set": data_quality.entry(1, {"age": 12})}) == [
        ("bad records (train_set)", "1"), ("empty fields filled (train_set, per read)", "age: 12")]

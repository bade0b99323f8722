"""`elastimator report`: a PNG of training loss and evaluation metrics over steps.

The training loss is drawn faint as logged and bold smoothed (a centered moving average over a twentieth of
its points) where there are enough points for noise to hide the trend. Evaluations are points, joined by a faint line only where
there are enough of them to read a trend: a straight line between two evaluations suggests a course the model
never showed.
"""

from __future__ import annotations

import glob
import os

from elastimator.errors import ModelDirError
from elastimator.job.output_file import temporary_path_for
from elastimator.train_eval.eval_events import read_eval_events


def _series(pattern: str) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for step, values in sorted(read_eval_events(pattern).items()):
        for tag, value in values.items():
            if tag != "global_step":
                series.setdefault(tag, []).append((step, value))
    return series


TREND_POINTS = 4
"""Evaluations from this many on are joined by a line."""


def smoothed(values, window: int | None = None) -> list[float]:
    """`values` as a centered moving average over `window` points (default: a twentieth of them, odd), the
    window narrowing at the ends: the trend of a noisy loss, at the steps it belongs to (an exponential
    average would lag behind it)."""
    values = list(values)
    window = window or max(1, len(values) // 20)
    half = window // 2
    return [sum(values[max(0, i - half):i + half + 1]) / len(values[max(0, i - half):i + half + 1])
            for i in range(len(values))]


def title(model_dir: str, steps: int) -> str:
    """The chart's title: the model_dir's name and how far it trained (its full path is where the PNG is)."""
    name = os.path.basename(os.path.normpath(os.path.abspath(model_dir)))
    return f"{name}: {steps:,} steps"


def trained_to(model_dir: str, loss_steps, evaluations: dict) -> int:
    """How far the model trained: its newest checkpoint's step (what `inspect` shows), else the last step its
    events name (the loss is logged every few steps, so its last point is short of the end)."""
    from elastimator.estimator import CheckpointDir

    checkpoints = CheckpointDir(model_dir).on_disk()
    if checkpoints:
        return checkpoints[-1][0]
    return max([*loss_steps, *(step for series in evaluations.values() for points in series.values()
                               for step, _ in points)])


def readable_limits(values, min_span_fraction: float = 0.1) -> tuple[float, float]:
    """y-axis limits that show `values` without magnifying noise: at least 0.1 wide for a metric within
    [0, 1] (accuracy, AUC), at least 10% of its size otherwise, and clipped to [0, 1] when it lives there."""
    lo, hi = min(values), max(values)
    unit = 0.0 <= lo and hi <= 1.0
    span = max(hi - lo, min_span_fraction if unit else min_span_fraction * max(abs(lo), abs(hi), 1e-12))
    middle = (lo + hi) / 2
    lo, hi = middle - 0.55 * span, middle + 0.55 * span
    if unit and lo < 0.0:  # slide the window into [0, 1]
        lo, hi = 0.0, hi - lo
    if unit and hi > 1.0:
        lo, hi = max(0.0, lo - (hi - 1.0)), 1.0
    return lo, hi


def write_chart(model_dir: str, output: str | None = None) -> str:
    """Plots `loss` (and steps/s) from training events and every eval metric; returns the PNG path.

    Raises:
        ModelDirError: when model_dir has no training events.
    """
    import logging

    # A first run builds matplotlib's font cache and logs "generated new fontManager" at INFO, which says
    # nothing about the report; its warnings still show.
    logging.getLogger("matplotlib").setLevel(max(logging.WARNING, logging.getLogger("matplotlib").level))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    train = _series(os.path.join(model_dir, "events.out.tfevents.*"))
    if "loss" not in train:
        raise ModelDirError(f"{model_dir!r} has no training events with a 'loss'; train a model there first.")
    evaluations = {os.path.basename(d): _series(os.path.join(d, "events.out.tfevents.*"))
                   for d in sorted(glob.glob(os.path.join(model_dir, "eval*")))}
    eval_metrics = sorted({m for series in evaluations.values() for m in series} - {"loss"})
    panels = 1 + len(eval_metrics)
    columns = min(3, panels)
    rows = -(-panels // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    flat = axes.ravel()
    steps, values = zip(*train["loss"])
    if len(values) >= 60:
        line, = flat[0].plot(steps, values, linewidth=0.8, alpha=0.3)
        flat[0].plot(steps, smoothed(values), color=line.get_color(), linewidth=1.8, label="train loss (smoothed)")
    else:
        flat[0].plot(steps, values, marker=".", linewidth=1, label="train loss")
    for name, series in evaluations.items():
        if "loss" in series:
            _points(flat[0], series["loss"], f"{name} loss")
    flat[0].set_title("loss")
    flat[0].set_ylabel("loss")
    flat[0].legend()
    for axis, metric in zip(flat[1:], eval_metrics):
        shown = []
        for name, series in evaluations.items():
            if metric in series:
                _points(axis, series[metric], name)
                shown += [value for _, value in series[metric]]
        axis.set_ylim(*readable_limits(shown))
        axis.set_title(metric)
        axis.set_ylabel(metric)
        axis.legend()
    for axis in flat:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("global step")
        axis.grid(alpha=0.3)
    for axis in flat[panels:]:
        axis.set_visible(False)
    figure.suptitle(title(model_dir, trained_to(model_dir, steps, evaluations)), fontsize=13)
    figure.tight_layout()
    output = output or os.path.join(model_dir, "report.png")
    with temporary_path_for(output) as temporary:
        figure.savefig(temporary, dpi=100, format="png")
    plt.close(figure)
    return output


def _points(axis, series: list[tuple[int, float]], label: str) -> None:
    """Evaluations as points; joined by a faint dotted line from TREND_POINTS of them on."""
    steps, values = zip(*series)
    trend = len(series) >= TREND_POINTS
    axis.plot(steps, values, marker="o", markersize=6, linestyle=":" if trend else "none",
              linewidth=1 if trend else 0, label=label)

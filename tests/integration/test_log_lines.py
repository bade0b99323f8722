"""A plain tf.estimator program's screen under `python -m elastimator.compat`, compared with tf.estimator 2.15's.

The programs in log_lines/ set `tf.compat.v1.logging.set_verbosity(INFO)` (as the Estimator guide's do), or also
call `logging.basicConfig(level=INFO)`, or leave the verbosity alone. What 2.15 printed for each is recorded in
log_lines/tf215.json (log_lines/record_tf215.py) as kinds of lines (values, paths and times masked): elastimator
prints the same kinds of INFO lines in the same order, each once, and no warning 2.15 did not print.
"""

import json
import os
import re
import sys

import pytest

from tests.integration.log_lines import screen

pytestmark = pytest.mark.integration
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log_lines")
with open(os.path.join(HERE, "tf215.json")) as f:
    TF215 = json.load(f)

KEPT_EVALUATIONS = {"custom_program": (), "canned_program": (1,)}
"""The evaluations (counted from 0) each program runs in a graph kept from its previous evaluation
(estimator/loops/warm_graphs.py): train_and_evaluate's evaluation after the canned program's own `evaluate`."""

NOT_IN_A_KEPT_CALL = ("Calling model_fn.", "Done calling model_fn.", "Graph was finalized.")
"""What 2.15 printed for each evaluation and a kept graph's call does not do: it calls no model_fn and builds no
graph (it restores the checkpoint and resets the metrics into the graph and session it kept)."""


def _expected(program: str, kinds: list[str]) -> list[str]:
    """2.15's kinds of INFO lines for `program`, less what its kept evaluations do not do: the model_fn lines
    before each one's "Starting evaluation" and the "Graph was finalized." after it."""
    expected = list(kinds)
    starts = [i for i, kind in enumerate(expected) if kind.startswith("Starting evaluation at")]
    for index in sorted(KEPT_EVALUATIONS[program], reverse=True):
        start = starts[index]
        assert expected[start - 2:start] == list(NOT_IN_A_KEPT_CALL[:2]), expected[start - 2:start + 2]
        assert expected[start + 1] == NOT_IN_A_KEPT_CALL[2], expected[start + 1]
        del expected[start + 1]
        del expected[start - 2:start]
    return expected


def _run(program: str, shown: str, tmp_path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # TensorFlow's own default
    return screen.run([sys.executable, "-m", "elastimator.compat"], os.path.join(HERE, f"{program}.py"),
                      str(tmp_path / "model"), shown, env)


def _new_warnings(stderr: str, recorded: list[str]) -> list[str]:
    return sorted(set(screen.warning_kinds(stderr)) - set(recorded))


@pytest.mark.parametrize("program, shown", [("custom_program", "info"), ("canned_program", "info"),
                                            ("canned_program", "basic_config")])
def test_a_program_at_info_verbosity_prints_2_15s_lines_once_each_in_order(program, shown, tmp_path):
    """With `logging.basicConfig(level=INFO)` too, each line is printed once (2.15 printed each twice there)."""
    stderr = _run(program, shown, tmp_path)
    recorded = TF215[f"{program} info"]
    assert screen.info_kinds(stderr) == _expected(program, recorded["info"]), stderr[-6000:]
    assert _new_warnings(stderr, recorded["warnings"]) == []


def test_a_program_at_the_default_verbosity_prints_no_info_line(tmp_path):
    stderr = _run("custom_program", "default", tmp_path)
    recorded = TF215["custom_program default"]
    assert recorded["info"] == [] and screen.info_kinds(stderr) == []
    # Nor elastimator's own lines ("step 100: loss = 0.17 (850.2 steps/s)", on a logger with no handler).
    assert not re.search(r"^INFO:|loss = ", stderr, re.MULTILINE), stderr[-4000:]
    assert _new_warnings(stderr, recorded["warnings"]) == []

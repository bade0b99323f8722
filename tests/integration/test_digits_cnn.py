"""End to end: the guide's CNN on real digits, trained, evaluated, exported and served.

Everything runs as separate processes, as a user would run it: the example
script trains, evaluates, predicts and exports; a fresh Python process serves
the export with plain TensorFlow; `saved_model_cli` inspects it.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import read_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_seed_cnn_trains_to_accuracy_and_its_export_serves_in_a_fresh_process(tmp_path):
    model_dir = tmp_path / "digits"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "digits_cnn.py"), "--model-dir", str(model_dir),
         "--steps", "2000"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["global_step"] == 2000
    assert summary["accuracy"] >= 0.95, summary
    assert summary["served_matches_predict"] == 1.0

    assert sorted(os.listdir(model_dir / "eval"))[0].startswith("events.out.tfevents")
    assert "accuracy" in read_events(str(model_dir / "eval"))
    assert {"loss", "global_step/sec"} <= set(read_events(str(model_dir)))

    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", summary["export_dir"], "--all"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "signature_def['serving_default']" in shown.stdout
    assert "outputs['probabilities'] tensor_info" in shown.stdout

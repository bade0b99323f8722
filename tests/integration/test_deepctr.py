"""Third-party tf.estimator code, unedited: DeepCTR 0.9.4's estimators trained on elastimator.

`deepctr` is installed with `--no-deps` by scripts/test.sh (its pinned dependencies
predate TF 2.21). The program in deepctr/run_deepctr.py never mentions elastimator; it
runs under `python -m elastimator.compat`. The full 13-model matrix takes ~5 minutes on
two cores, so CI trains the two models the seeds use (DeepFM and wide & deep) and
docs/migration.md records the full matrix.
"""

import json
import math
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATE = os.path.join(HERE, "..", "..", "examples", "criteo", "generate_data.py")
ROWS, BATCH = 4000, 256


def test_deepctr_estimators_train_and_evaluate_unchanged(tmp_path):
    data = tmp_path / "criteo.tsv"
    subprocess.run([sys.executable, GENERATE, str(data), "--rows", str(ROWS), "--seed", "3"], check=True)
    # DeepCTR checks PyPI for a newer version on import; point it at a closed loopback port so it fails at once.
    env = dict(os.environ, https_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-m", "elastimator.compat", os.path.join(HERE, "deepctr", "run_deepctr.py"), str(data),
         str(tmp_path / "models"), "--epochs", "1", "DeepFMEstimator", "WDLEstimator"],
        capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    results = [json.loads(line[len("RESULT "):]) for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    print(results)
    assert [r["model"] for r in results] == ["DeepFMEstimator", "WDLEstimator"]
    for r in results:
        assert r["ok"], r
        assert r["steps"] == math.ceil(ROWS * 0.8 / BATCH)
        assert 0.0 < r["auc"] < 1.0 and math.isfinite(r["logloss"])
        checkpoints = os.listdir(tmp_path / "models" / r["model"])
        assert any(name.startswith(f"model.ckpt-{r['steps']}") for name in checkpoints), checkpoints

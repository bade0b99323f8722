"""The bundled census example, through the command the README gives."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_census_wide_and_deep_reaches_its_auc(tmp_path):
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    result = subprocess.run([cli, "run", "examples/census/census_conf.py:CensusConf", "--model-dir",
                             str(tmp_path / "census"), "--no-progress"],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = dict(line.split(None, 1) for line in result.stdout.splitlines()[2:] if line.startswith("  ")
                   and len(line.split(None, 1)) == 2)
    print(result.stdout)
    assert float(summary["auc"]) >= 0.89
    assert summary["global"].endswith("3000")
    assert os.listdir(tmp_path / "census" / "export" / "best")

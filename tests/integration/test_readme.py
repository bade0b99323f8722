"""The README's example program runs as printed and trains a model."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_readme_example_trains_as_printed(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        program = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    assert "/tmp/model" in program
    program = program.replace("/tmp/model", str(tmp_path / "model"))
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.path.join(ROOT, "src")))
    assert result.returncode == 0, result.stderr[-3000:]
    # The program itself says that it trained: its last line, as a user sees it.
    said = re.fullmatch(r"step 2000: loss ([0-9.]+)\n", result.stdout)
    assert said is not None, result.stdout
    assert float(said.group(1)) < 0.7  # untrained: ln 3 = 1.1
    assert any(name.startswith("model.ckpt-2000") for name in os.listdir(tmp_path / "model"))

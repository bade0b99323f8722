"""Raising a process's soft open-file limit (elastimator.elastic.open_files), in processes of their own: a limit
set there stays for the whole process."""

import json
import subprocess
import sys

import pytest

CHILD = """
import json, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (100, 5000))
from elastimator.elastic.open_files import raise_limit
answers = [raise_limit(3000), raise_limit(50), raise_limit(10000)]
print(json.dumps({"answers": answers, "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open-file limits as Linux sets them")
def test_the_soft_limit_rises_as_far_as_wanted_never_past_the_hard_limit_and_never_falls():
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {"answers": [3000, 3000, 5000], "soft": 5000}

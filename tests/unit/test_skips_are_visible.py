"""A test run without DLRover's examples beside the checkout says so at its start and its end, not only in the
skip list."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_run_without_dlrover_examples_says_their_tests_skip_at_the_start_and_the_end():
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "tests/compat_programs/test_dlrover_examples.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, ELASTIMATOR_SHARED="/nonexistent"))
    lines = run.stdout.splitlines()
    said = [i for i, line in enumerate(lines) if "DLRover's examples: NOT FOUND at /nonexistent/dlrover-examples, "
                                                     "so their tests SKIP" in line]
    assert run.returncode == 0 and len(said) == 2, run.stdout[-2000:]
    assert said[0] < 5 and said[1] > len(lines) - 12  # in the header, and in the closing summary

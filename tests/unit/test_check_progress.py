"""`elastimator check` over a large tree: a line on a terminal says how many files it has read, the summary
says how many it read, and a file that never names `estimator` is not parsed."""

import os
import pty
import subprocess
import sys

from elastimator.migrate import check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))


def _tree(tmp_path):
    tree = tmp_path / "project"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "train.py").write_text("import tensorflow as tf\nest = tf.estimator.Estimator\n")
    for i in range(3):
        (tree / "pkg" / f"plain_{i}.py").write_text("x = 1\n")
    (tree / "pkg" / "broken.py").write_text("def (\n")  # no 'estimator' in it: not even parsed
    return tree


def test_the_summary_counts_the_files_read(tmp_path):
    result = subprocess.run([sys.executable, "-m", "elastimator.cli", "check", str(_tree(tmp_path))],
                            capture_output=True, text=True, env=ENV, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == ("1 uses of tf.estimator's API in 1 files (of 5 read); all served by "
                                              "elastimator.")
    assert result.stderr == ""  # not a terminal: no progress line


def test_a_terminal_sees_how_many_files_were_read(tmp_path):
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "elastimator.cli", "check", str(_tree(tmp_path))],
                               stdout=subprocess.PIPE, stderr=terminal, env=ENV)
    os.close(terminal)
    out, _ = process.communicate(timeout=60)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    assert process.returncode == 0
    assert b"\rchecking: 5 of 5 files read" in seen, seen
    assert seen.endswith(b"\r\x1b[K")  # the line is cleared: the report follows on stdout
    assert b"(of 5 read)" in out


def test_check_sources_counts_every_file_it_read(tmp_path):
    tree = _tree(tmp_path)
    checked = check.check_sources([str(tree)])
    assert checked.files_read == 5 and [u.name for u in checked.uses] == ["tf.estimator.Estimator"]

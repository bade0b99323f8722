"""Every private module the compat surface table serves imports in every spelling Python has for it.

`import a.b.c as x` and `import a.b.c` followed by the attribute chain `a.b.c` walk the parents' attributes from
the top package down; `from a.b import c` reads the parent's attribute or sys.modules. Each statement runs in a
fresh interpreter under `elastimator.compat`, as a program's first import would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from elastimator.migrate import surface

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _served_modules() -> list[str]:
    modules = [f"{root}.{path}" if path else root for root in surface.PRIVATE_ROOTS for path in surface.PRIVATE]
    return modules + list(surface.REMOVED_TF_MODULES)


def _statements(module: str) -> list[str]:
    parent, _, child = module.rpartition(".")
    checks = f"assert {{name}}.__name__ == {module!r}, {{name}}.__name__"
    # TensorFlow deletes its `python` attribute (2.15 did too), so the attribute chain of a module under
    # `tensorflow.python` starts at `tensorflow.python` itself.
    start = "tensorflow.python" if module.startswith("tensorflow.python.") else module.partition(".")[0]
    chain = "_top" + module[len(start):]
    return [f"import {module} as _x; " + checks.format(name="_x"),
            f"import {module}; import {start} as _top; " + checks.format(name=chain),
            f"from {parent} import {child} as _y; " + checks.format(name="_y")]


_PROGRAM = """
import json, sys, traceback
import elastimator.compat
elastimator.compat.install()
failed = []
for statement in json.loads(sys.argv[1]):
    try:
        exec(statement, {})
    except Exception as error:  # every failure is reported, not only the first
        failed.append(f"{statement!r}: {type(error).__name__}: {error}")
print("FAILED " + json.dumps(failed))
"""


def test_every_served_private_module_imports_in_every_spelling_under_compat():
    modules = _served_modules()
    assert "tensorflow_estimator.python.estimator.estimator" in modules  # the spelling TF Lattice uses
    statements = [s for module in modules for s in _statements(module)]
    run = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(statements)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TF_CPP_MIN_LOG_LEVEL="3"))
    lines = [line for line in run.stdout.splitlines() if line.startswith("FAILED ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    failed = json.loads(lines[-1][len("FAILED "):])
    assert failed == [], "\n".join(failed)
    assert len(statements) == 3 * len(modules) > 150


def test_the_intermediate_packages_are_modules_whose_child_is_the_estimator_root():
    program = ("import elastimator.compat; elastimator.compat.install()\n"
               "import sys, tensorflow_estimator.python as p\n"
               "print(p.__name__, p.estimator.__name__, sys.modules['tensorflow_estimator.python'] is p,\n"
               "      hasattr(p, '__path__'))\n")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TF_CPP_MIN_LOG_LEVEL="3"))
    assert run.stdout.split() == ["tensorflow_estimator.python", "tensorflow_estimator.python.estimator", "True",
                                  "True"], run.stderr[-3000:]

"""`python -m elastimator.compat SCRIPT [ARGS...]`: run an unmodified tf.estimator script on elastimator.
`python -m elastimator.compat -m MODULE [ARGS...]`: the same for a module, as `python -m MODULE` runs it.
`python -m elastimator.compat -c COMMAND [ARGS...]`: the same for a program passed as a string, as `python -c`.

`-m dlrover.trainer.entry.local_entry` (or `-m dlrover.trainer`) runs DLRover's trainer entry command on
elastimator, its flags keeping their meaning (elastimator/dlrover_entry.py), whether or not DLRover is
installed.
"""

from __future__ import annotations

import os
import runpy
import sys

from elastimator.compat import install
from elastimator.compat.dlrover import ENTRY_MODULES

STAND_IN = "elastimator.dlrover_entry"
"""The module run for DLRover's entry modules (ENTRY_MODULES), as `python -m` would run it."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print("elastimator: error: -m needs a module name: python -m elastimator.compat -m MODULE [ARGS...]",
                  file=sys.stderr)
            return 2
        return _run_module(argv[1], argv[2:])
    if argv[0] == "-c":
        if len(argv) < 2:
            print("elastimator: error: -c needs a program: python -m elastimator.compat -c COMMAND [ARGS...]",
                  file=sys.stderr)
            return 2
        install()
        sys.argv = ["-c", *argv[2:]]
        sys.path[0] = ""  # As `python -c` sets it: the working directory.
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used
        return 0
    install()
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # As `python SCRIPT` would set it.
    runpy.run_path(argv[0], run_name="__main__")
    return 0


def _run_module(module: str, args: list[str]) -> int:
    sys.argv = [module, *args]
    sys.path[0] = os.getcwd()  # As `python -m MODULE` would set it.
    if module in ENTRY_MODULES:  # elastimator's stand-in, a module above the command line it runs
        runpy.run_module(STAND_IN, run_name="__main__", alter_sys=True)
        return 0
    install()
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m elastimator.compat SCRIPT [ARGS...]`: run an unmodified tf.estimator script on elastimator."""

from __future__ import annotations

import os
import runpy
import sys

from elastimator.compat import install


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    install()
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # As `python SCRIPT` would set it.
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

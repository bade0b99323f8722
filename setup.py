"""The one compiled part: the report line's native read and answer (src/elastimator/elastic/_line_native.c).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no C compiler, not
Linux), the install goes on and the report line runs its Python loop (elastic/report_line_server.py).
"""

import sys

from setuptools import Extension, setup

native = [Extension("elastimator.elastic._line_native", ["src/elastimator/elastic/_line_native.c"], optional=True)]
setup(ext_modules=native if sys.platform.startswith("linux") else [])

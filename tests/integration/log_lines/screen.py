"""What a program printed to stderr, as kinds of lines: values, paths and times masked.

`INFO:tensorflow:loss = 0.6931472, step = 0` is the kind `loss = <n>, step = <n>`; `Saving dict for global step
250: accuracy = 0.99, loss = 0.12` keeps its metric names (`Saving dict for global step <n>: accuracy = <n>, loss =
<n>`); `Using config: {...}` is `Using config: {<dict>}`.
"""

from __future__ import annotations

import re
import subprocess

_TF_RECORD = re.compile(r"^(INFO|WARNING|ERROR):tensorflow:(.*)$")
_NATIVE = re.compile(r"^([IWEF])\d{4} [\d:. ]+\S+\] (.*)$")
"""A line of TensorFlow's native (absl) logger: `W0000 00:00:1796160703.843196    7219 file.cc:52] message`."""
_PYTHON_WARNING = re.compile(r"^\S+:\d+: (\w*Warning): (.*)$")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T-]\d{2}:\d{2}:\d{2}")
_PATH = re.compile(r"(?<![\w.])/[^\s,':]+")
_NUMBER = re.compile(r"(?<![\w/])-?\d+(\.\d+)?(e[-+]?\d+)?")


def mask(message: str) -> str:
    """A message's kind: times, absolute paths and numbers replaced by placeholders, a dict's contents too."""
    if message.startswith("Using config: {"):
        return "Using config: {<dict>}"
    message = _TIME.sub("<time>", message)
    message = _PATH.sub("<path>", message)
    return _NUMBER.sub("<n>", message)


def info_kinds(stderr: str) -> list[str]:
    """The kinds of TensorFlow's INFO lines, in order."""
    return [mask(m.group(2)) for m in map(_TF_RECORD.match, stderr.splitlines()) if m and m.group(1) == "INFO"]


def warning_kinds(stderr: str) -> list[str]:
    """The kinds of the warnings and errors printed: TensorFlow's Python logger's, its native logger's and Python's
    `warnings`, in order."""
    kinds = []
    for line in stderr.splitlines():
        if (m := _TF_RECORD.match(line)) and m.group(1) != "INFO":
            kinds.append(f"{m.group(1)}:tensorflow:{mask(m.group(2))}")
        elif (m := _NATIVE.match(line)) and m.group(1) != "I":
            kinds.append(f"native {m.group(1)}: {mask(m.group(2))}")
        elif m := _PYTHON_WARNING.match(line):
            kinds.append(f"{m.group(1)}: {mask(m.group(2))}")
    return kinds


def run(python: list[str], program: str, model_dir: str, screen: str, env: dict[str, str]) -> str:
    """Runs `program` (by `python`, a command) for `screen` and returns its stderr; raises if it failed."""
    result = subprocess.run([*python, program, model_dir, screen], capture_output=True, text=True, env=env,
                            timeout=900)
    if result.returncode != 0 or "DONE" not in result.stdout:
        raise RuntimeError(f"{program} {screen} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stderr

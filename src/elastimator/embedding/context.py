"""What the graph being built is for, as the embedding variables need to know it.

The Estimator engine opens `building(...)` around a model_fn call: a lookup made for training
admits new ids and is trainable; one made for evaluation or serving only reads. Outside the engine
(a graph a user builds by hand) lookups train, on this process's devices.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Iterator


@dataclasses.dataclass(frozen=True)
class BuildContext:
    training: bool = True
    """Lookups admit new ids and their rows are trained."""
    num_ps: int = 0
    """Parameter servers the tables are spread over (partition i on ps i mod num_ps); 0 keeps them local."""


_current: contextvars.ContextVar[BuildContext] = contextvars.ContextVar("elastimator_embedding_build",
                                                                         default=BuildContext())


def current() -> BuildContext:
    return _current.get()


@contextlib.contextmanager
def building(*, training: bool, num_ps: int) -> Iterator[BuildContext]:
    """While open, embedding variables are built for `training` and placed over `num_ps` parameter servers."""
    context = BuildContext(training=training, num_ps=num_ps)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)

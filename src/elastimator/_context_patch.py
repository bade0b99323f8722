"""A method of someone else's class, replaced only for the code that builds a model.

The engine changes two TensorFlow methods while a model_fn builds its graph (fused Adam updates,
embedding-variable updates). Swapping the class attribute for the duration would show the replacement to
every thread that calls the method meanwhile; instead the attribute is, once, a dispatcher that asks a
context variable whether the calling context is inside an `applied()` block. Another thread (or asyncio
task) sees the original, whatever this one is building.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from typing import Any, Callable, Iterator


class ContextPatch:
    """`owner.name` calls `replacement` within `applied()` blocks of the calling context, its original elsewhere.

    `owner.name` must be a plain function in the class (a method); the replacement takes the same arguments,
    the instance first, and may delegate to `original`.
    """

    def __init__(self, owner: type, name: str, replacement: Callable[..., Any]):
        self.owner = owner
        self.name = name
        self.replacement = replacement
        self.original = getattr(owner, name)
        """The method as it was when this object was made (what the replacement may delegate to)."""
        self._active = contextvars.ContextVar(f"elastimator_patch_{owner.__name__}_{name}", default=False)
        self._lock = threading.Lock()
        self._installed = False

    def _install(self) -> None:
        with self._lock:
            if self._installed:
                return
            original, replacement, active = self.original, self.replacement, self._active

            @functools.wraps(original)
            def dispatch(*args, **kwargs):
                return (replacement if active.get() else original)(*args, **kwargs)

            setattr(self.owner, self.name, dispatch)
            self._installed = True

    @property
    def active(self) -> bool:
        """Whether the calling context is inside an `applied()` block."""
        return self._active.get()

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        self._install()
        token = self._active.set(True)
        try:
            yield
        finally:
            self._active.reset(token)

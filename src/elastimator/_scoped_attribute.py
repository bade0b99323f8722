"""An attribute of someone else's class, replaced only while a `with` block needs it.

The engine changes two TensorFlow methods while a model_fn builds its graph (fused Adam updates,
embedding-variable updates) and puts them back when it returns. Blocks may nest and run on several
threads at once: the attribute is replaced by the first block to open and restored by the last to close.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator


class ScopedAttribute:
    """`owner.name` is `replacement` while at least one `applied()` block is open, and its original otherwise."""

    def __init__(self, owner: Any, name: str, replacement: Any):
        self.owner = owner
        self.name = name
        self.replacement = replacement
        self.original = getattr(owner, name)
        """The attribute as it was when this object was made (what the replacement may delegate to)."""
        self._lock = threading.Lock()
        self._depth = 0

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        with self._lock:
            self._depth += 1
            setattr(self.owner, self.name, self.replacement)
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    setattr(self.owner, self.name, self.original)

"""The process's long-lived objects, kept out of the garbage collector's full passes.

Once TensorFlow is imported, a Python process holds about 390,000 objects that
live as long as it does: TensorFlow's modules, functions, op registrations. A
full pass of Python's cyclic garbage collector walks every one of them, 0.17 s
on the benchmark machine. The pass comes when enough objects have piled up, so
whichever call is running at that moment pays for it. For the DeepFM benchmark
it fell in a 50-batch `predict` call, which took 0.46 s instead of 0.19 s.

`freeze_once()` runs before this process builds its first graph. It moves every
object alive at that moment into the collector's permanent generation
(`gc.freeze()`), which later passes skip. After that, a full pass walks only
what the process made since: the graphs, sessions and data of its calls.

The cost: a frozen object that later becomes garbage inside a reference cycle
is never collected. Objects that reach a zero reference count are still freed
as usual. What can stay behind this way is limited to what existed at the
freeze, mostly modules that live for the whole process anyway.

Set `ELASTIMATOR_GC_FREEZE=0` to leave the collector as it is.
"""

from __future__ import annotations

import gc
import os
import threading

ENV = "ELASTIMATOR_GC_FREEZE"

_lock = threading.Lock()
_done = False


def freeze_once() -> None:
    """Freezes the objects alive now, the first time this process calls it (unless ELASTIMATOR_GC_FREEZE=0)."""
    global _done  # pylint: disable=global-statement
    if _done:
        return
    with _lock:
        if _done:
            return
        _done = True
        if os.environ.get(ENV, "1").strip() != "0":
            gc.freeze()

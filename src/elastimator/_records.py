"""The base of each class tf.estimator 2.15 defined as a namedtuple (EstimatorSpec, TrainSpec, EvalSpec,
WarmStartSettings, the serving input receivers).

Programs treat those as tuples: they call `_replace` and `_asdict`, read `_fields`, compare and unpack them.
So ours are tuples too, with 2.15's fields in 2.15's order; each class validates in `__new__`, and `_replace`
goes through `__new__` again, so a replaced field is checked as a passed one is.
"""

from __future__ import annotations

import collections


def record_type(name: str, fields: tuple[str, ...]) -> type:
    """A namedtuple base named `name` with `fields`, whose `_replace` builds through the subclass's `__new__`."""
    base = collections.namedtuple(name, fields)

    def _replace(self, **changes):
        unknown = sorted(set(changes) - set(self._fields))
        if unknown:
            raise ValueError(f"{name}._replace: got unexpected field names {unknown}; fields are {list(fields)}.")
        return type(self)(**{**self._asdict(), **changes})

    base._replace = _replace
    return base

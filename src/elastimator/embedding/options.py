"""What an embedding variable admits, forgets and starts from: DeepRec's option objects, as typed dataclasses.

DeepRec model code writes `tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=3),
evict_option=tf.GlobalStepEvict(steps_to_live=4000))`; these classes take the same arguments.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elastimator._validate import is_int
from elastimator.errors import ConfigError


def _count(owner: str, name: str, value: Any, *, minimum: int) -> int:
    if not is_int(value, minimum=minimum):
        raise ConfigError(f"{owner}: {name} must be an int >= {minimum}; got {value!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class CounterFilter:
    """Admit an id into the table only once it has been seen `filter_freq` times.

    Until then the id's lookups return `InitializerOption.default_value_no_permission` and its
    gradients are dropped, so ids seen once or twice never take a row.
    """

    filter_freq: int = 0
    """Occurrences (counted per example, over the whole job) before an id gets a row; 0 or 1 admits at once."""

    def __post_init__(self):
        _count("CounterFilter", "filter_freq", self.filter_freq, minimum=0)


@dataclasses.dataclass(frozen=True)
class GlobalStepEvict:
    """Forget ids not seen for `steps_to_live` global steps; they are dropped before each checkpoint is saved."""

    steps_to_live: int | None = None
    """Global steps an id lives after its last lookup in training; None never evicts."""

    def __post_init__(self):
        if self.steps_to_live is not None:
            _count("GlobalStepEvict", "steps_to_live", self.steps_to_live, minimum=1)


@dataclasses.dataclass(frozen=True)
class InitializerOption:
    """Where an id's first row comes from.

    `default_value_dim` rows are drawn from `initializer` once (and saved with the model); an id
    starts from row `id mod default_value_dim` of them, so the same id starts from the same row in
    every process, and a served model returns that row for an id it never trained.
    """

    initializer: Any = None
    """A TensorFlow initializer; None uses the one given to `get_embedding_variable` (or Glorot uniform)."""
    default_value_dim: int = 4096
    """How many initial rows are drawn."""
    default_value_no_permission: float = 0.0
    """The value every element of a not-yet-admitted id's lookup has (see CounterFilter)."""

    def __post_init__(self):
        _count("InitializerOption", "default_value_dim", self.default_value_dim, minimum=1)
        if isinstance(self.default_value_no_permission, bool) or not isinstance(
                self.default_value_no_permission, (int, float)):
            raise ConfigError("InitializerOption: default_value_no_permission must be a number; got "
                              f"{self.default_value_no_permission!r}.")


@dataclasses.dataclass(frozen=True)
class StorageOption:
    """DeepRec's storage tiers (DRAM, PMEM, SSD). elastimator keeps every table in memory; the option is accepted
    so DeepRec code runs, and any value other than DRAM is reported once in the log."""

    storage_type: Any = None
    storage_path: Any = None
    storage_size: Any = None
    cache_strategy: Any = None
    layout: Any = None


@dataclasses.dataclass(frozen=True)
class EmbeddingVariableOption:
    """Options of one embedding variable (DeepRec's `tf.EmbeddingVariableOption`)."""

    ht_type: str = ""
    """DeepRec's hash-map implementation; elastimator has one (TensorFlow's mutable hash table), any value is kept."""
    ht_partition_num: int = 1000
    """DeepRec's hash-map lock striping; not used here."""
    evict_option: GlobalStepEvict | None = None
    filter_option: CounterFilter | None = None
    storage_option: StorageOption = dataclasses.field(default_factory=StorageOption)
    init_option: InitializerOption = dataclasses.field(default_factory=InitializerOption)

    def __post_init__(self):
        for name, kind in (("evict_option", GlobalStepEvict), ("filter_option", CounterFilter),
                           ("storage_option", StorageOption), ("init_option", InitializerOption)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ConfigError(f"EmbeddingVariableOption: {name} must be a {kind.__name__} or None; got "
                                  f"{type(value).__name__} {value!r}.")
        if self.storage_option is None:
            object.__setattr__(self, "storage_option", StorageOption())
        if self.init_option is None:
            object.__setattr__(self, "init_option", InitializerOption())

    @property
    def filter_freq(self) -> int:
        """Occurrences before an id is admitted (1 when there is no filter)."""
        return max(1, self.filter_option.filter_freq) if self.filter_option else 1

    @property
    def steps_to_live(self) -> int | None:
        return self.evict_option.steps_to_live if self.evict_option else None

"""Batch predictions from an exported SavedModel over a delimited file with a header."""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import sys
from typing import Iterator, Sequence, TextIO

import numpy as np
import tensorflow as tf

from elastimator.errors import ExportError, MissingPathError, ReaderError
from elastimator.train_eval.exporters import exports_in

logger = logging.getLogger("elastimator")


def resolve_saved_model(path: str) -> str:
    """`path` if it is a SavedModel; else the newest export under it (an export base or a model_dir), said in a log.

    Raises:
        MissingPathError: `path` does not exist.
        ExportError: nothing exported there, naming where exports would be.
    """
    if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        return path
    if not tf.io.gfile.isdir(path):
        raise MissingPathError(f"--saved-model {path!r} does not exist (current directory: {os.getcwd()}).")
    bases = [path] + sorted(tf.io.gfile.glob(os.path.join(path, "export", "*")))
    exports = [e for base in bases for e in exports_in(base)
               if tf.io.gfile.exists(os.path.join(e, "saved_model.pb"))]
    if not exports:
        raise ExportError(
            f"--saved-model {path!r} is not a SavedModel and has no export under it (looked in {path}/<timestamp> "
            f"and {os.path.join(path, 'export')}/<name>/<timestamp>). Train with an exporter, or run "
            "`elastimator export CONF` first.")
    newest = max(exports, key=lambda e: int(os.path.basename(e)))
    logger.info("Using the newest export under %s: %s", path, newest)
    return newest


def _signature(saved_model_dir: str, name: str):
    try:
        loaded = tf.saved_model.load(saved_model_dir)
    except (OSError, ValueError, tf.errors.OpError) as e:
        raise ExportError(f"Cannot load a SavedModel from {saved_model_dir!r}: {str(e).splitlines()[0]}") from e
    if name not in loaded.signatures:
        raise ExportError(f"SavedModel {saved_model_dir!r} has no signature {name!r}; it has "
                          f"{sorted(loaded.signatures)}.")
    return loaded, loaded.signatures[name]


def _batches(reader, size: int) -> Iterator[list[list[str]]]:
    batch = []
    for row in reader:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _column(values: list[str], spec: tf.TensorSpec):
    if spec.dtype == tf.string:
        return tf.constant(values, tf.string)
    array = np.asarray(values, dtype=np.float64 if spec.dtype.is_floating else np.int64)
    return tf.constant(array.astype(spec.dtype.as_numpy_dtype))


def _parses(value: str, dtype) -> bool:
    try:
        (float if dtype.is_floating else int)(value)
        return True
    except ValueError:
        return False


def _faults(batch: list[list[str]], width: int, index: dict[str, int], input_specs: dict) -> dict[int, str]:
    """Row (in `batch`) -> why it cannot be fed to the model: its field count, or a value its input's dtype does not
    take (with what to do about it). Numbers are parsed row by row only for a column that fails as a whole."""
    faults = {i: f"expected {width} fields, got {len(row)}" for i, row in enumerate(batch) if len(row) != width}
    for name, spec in input_specs.items():
        if spec.dtype == tf.string:
            continue
        try:
            np.asarray([row[index[name]] for i, row in enumerate(batch) if i not in faults],
                       dtype=np.float64 if spec.dtype.is_floating else np.int64)
            continue
        except ValueError:
            pass
        for i, row in enumerate(batch):
            value = row[index[name]] if i not in faults else None
            if value is not None and not _parses(value, spec.dtype):
                faults[i] = (f"input {name!r} = {value!r} is not a valid {spec.dtype.name}, the dtype the "
                             f"SavedModel takes for it")
    return dict(sorted(faults.items()))


@dataclasses.dataclass(frozen=True)
class Predicted:
    """What `predict_file` did."""

    rows: int
    """Rows predicted (one output row each)."""
    bad_rows: list[str]
    """"FILE:LINE: why" of each input row skipped (at most `max_bad_records`)."""


def _flatten(outputs: dict) -> tuple[list[str], list[np.ndarray]]:
    names, columns = [], []
    for key in sorted(outputs):
        value = outputs[key].numpy()
        value = value.reshape(value.shape[0], -1) if value.ndim > 1 else value.reshape(-1, 1)
        if value.shape[1] == 1:
            names.append(key)
            columns.append(value[:, 0])
        else:
            for i in range(value.shape[1]):
                names.append(f"{key}_{i}")
                columns.append(value[:, i])
    return names, columns


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)


def predict_file(saved_model_dir: str, input_path: str, output: TextIO | None = None, batch_size: int = 1024,
                 field_delim: str = ",", signature: str = "serving_default", keep_columns: Sequence[str] = (),
                 max_bad_records: int = 0) -> Predicted:
    """Writes one CSV row of outputs per input row the model can take.

    The input's header names the columns; the signature's inputs are taken by
    name (other columns, such as the label, are ignored). `keep_columns` are
    input columns (an id, the label) copied first into each output row. Up to
    `max_bad_records` rows that the model cannot take (a field missing, a value
    its input's dtype does not hold) are skipped, each logged with its line.

    Raises:
        ReaderError: past `max_bad_records` bad rows (listing the first ones), or an input that lacks a column.
    """
    _, function = _signature(resolve_saved_model(saved_model_dir), signature)
    input_specs = function.structured_input_signature[1]
    output = output or sys.stdout
    try:
        source = open(input_path, newline="", encoding="utf-8")
    except FileNotFoundError as e:
        raise MissingPathError(f"Cannot read --input {input_path!r}: {e.strerror} (current directory: "
                               f"{os.getcwd()}).") from e
    except OSError as e:
        raise ReaderError(f"Cannot read --input {input_path!r}: {e.strerror}.") from e
    with source:
        reader = csv.reader(source, delimiter=field_delim)
        header = next(reader, None)
        if header is None:
            raise ReaderError(f"--input {input_path!r} is empty; expected a header line and rows.")
        missing = sorted(set(input_specs) - set(header))
        if missing:
            raise ReaderError(f"--input {input_path!r} lacks column(s) {missing} that the model takes; its header "
                              f"has {header}.")
        absent = [name for name in keep_columns if name not in header]
        if absent:
            raise ReaderError(f"--keep-columns names {absent}, which --input {input_path!r} does not have; its "
                              f"header has {header}.")
        kept = [header.index(name) for name in keep_columns]
        ignored = sorted(set(header) - set(input_specs) - set(keep_columns))
        if ignored:
            logger.info("Ignoring input column(s) the model does not take: %s", ", ".join(ignored))
        index = {name: header.index(name) for name in input_specs}
        writer = csv.writer(output)
        rows, line, bad, wrote_header = 0, 2, [], False
        for batch in _batches(reader, batch_size):
            faults = _faults(batch, len(header), index, input_specs)
            for offset, why in faults.items():
                bad.append(f"{input_path}:{line + offset}: {why}")
                if len(bad) > max_bad_records:
                    raise ReaderError(_too_many(bad, max_bad_records))
                logger.warning("Skipping bad row %s", bad[-1])
            good = [row for i, row in enumerate(batch) if i not in faults]
            line += len(batch)
            if not good:
                continue
            inputs = {name: _column([row[index[name]] for row in good], spec) for name, spec in input_specs.items()}
            names, columns = _flatten(function(**inputs))
            if not wrote_header:
                writer.writerow([*keep_columns, *names])
                wrote_header = True
            for row, values in zip(good, zip(*columns)):
                writer.writerow([*(row[i] for i in kept), *(_text(v) for v in values)])
            rows += len(good)
    return Predicted(rows, bad)


def _too_many(bad: list[str], limit: int) -> str:
    fix = "Fix those rows, or give --max-bad-records N to skip up to N bad rows (each is logged with its line)."
    if any("the dtype the SavedModel takes" in why for why in bad):
        fix += (" A column whose values are all of another kind (text in an int column) was declared with the "
                "wrong dtype in the conf the model was exported from: fix the column's dtype there, train and "
                "export again.")
    first = "; ".join(bad[:5])
    more = f" (first 5 of more than {limit + 1})" if len(bad) > 5 else ""
    return f"{len(bad)} bad row(s) in --input, more than --max-bad-records={limit}{more}: {first}. {fix}"

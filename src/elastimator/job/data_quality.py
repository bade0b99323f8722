"""What each process's data sets met: malformed records skipped and empty fields filled with defaults.

Each process writes `<model_dir>/data_report/<task>.json` when its part of the
job ends; `read` adds the processes up for `elastimator inspect`.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Mapping, Sequence

REPORT_DIR = "data_report"
"""Where in a model_dir the per-process files go (the name model_dirs written before this module was renamed use)."""


def entry(bad_records: int, filled_fields: Mapping[str, int]) -> dict:
    return {"bad_records": int(bad_records), "filled_fields": dict(sorted(filled_fields.items()))}


def write(model_dir: str, task: str, data_sets: Mapping[str, dict]) -> str:
    """Writes one process's report (atomically: a reader never sees half a file); returns its path."""
    directory = os.path.join(model_dir, REPORT_DIR)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{task}.json")
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
        json.dump(data_sets, f, indent=1, sort_keys=True)
    os.replace(temporary, path)
    return path


def read(model_dir: str) -> dict[str, dict]:
    """Every process's report added up, per data set ({} when no process wrote one)."""
    total: dict[str, dict] = {}
    for path in sorted(glob.glob(os.path.join(model_dir, REPORT_DIR, "*.json"))):
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            continue  # A report is informational; a damaged one must not break inspect.
        for name, data in report.items():
            into = total.setdefault(name, entry(0, {}))
            into["bad_records"] += int(data.get("bad_records", 0))
            for column, count in data.get("filled_fields", {}).items():
                into["filled_fields"][column] = into["filled_fields"].get(column, 0) + int(count)
    return total


def rows(data_sets: Mapping[str, dict]) -> list[tuple[str, str]]:
    """Table rows: bad records and filled fields per data set."""
    out: list[tuple[str, str]] = []
    for name, data in data_sets.items():
        out.append((f"bad records ({name})", str(data["bad_records"])))
        filled = data["filled_fields"]
        if filled:
            text = ", ".join(f"{column}: {count}" for column, count in sorted(filled.items()))
            # Counted as read (a record read in each of 12 epochs counts 12 times; a replayed batch again): naming
            # every record with an empty field would cost memory as the data grows. Bad records are few and
            # counted once each.
            out.append((f"empty fields filled ({name}, per read)", text))
    return out


def of_inputs(inputs: Sequence) -> dict[str, dict]:
    """The report of DataSetInputs, by data set name."""
    return {data.spec.name: entry(data.tally.count, data.filled.counts) for data in inputs}

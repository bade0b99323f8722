"""`elastimator predict` with rows the model cannot take: skipped up to --max-bad-records, each listed; and a
column declared with the wrong dtype is answered with the fix, in `predict` and in `run`."""

import csv
import os

import pytest

from tests.integration.test_cli import TINY, _cli, write_iris

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    data = tmp_path_factory.mktemp("tiny")
    write_iris(data)
    result = _cli("run", TINY, "--max-steps", "20", env={"TINY_DATA": str(data)})
    assert result.returncode == 0, result.stderr[-3000:]
    return data, os.path.join(data, "model")


def _input(tmp_path, rows):
    path = tmp_path / "input.csv"
    path.write_text("id,a,b,c,d\n" + "".join(f"{row}\n" for row in rows))
    return path


ROWS = ["1,5.1,3.5,1.4,0.2", "2,5.1,x,1.4,0.2", "3,6.3,3.3,6.0,2.5", "4,6.3,3.3", "5,4.9,3.0,1.4,0.2"]


def test_bad_rows_are_skipped_up_to_max_bad_records_and_listed(exported, tmp_path):
    _, model_dir = exported
    source, out = _input(tmp_path, ROWS), tmp_path / "predictions.csv"
    result = _cli("predict", "--saved-model", model_dir, "--input", str(source), "--output", str(out),
                  "--keep-columns", "id", "--max-bad-records", "2", "--batch-size", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    predicted = list(csv.reader(open(out)))
    assert [row[0] for row in predicted] == ["id", "1", "3", "5"]
    assert f"Skipping bad row {source}:3: input 'b' = 'x' is not a valid float32" in result.stderr
    assert f"Skipping bad row {source}:5: expected 5 fields, got 3" in result.stderr
    assert "Wrote predictions for 3 row(s) to" in result.stderr
    assert "skipped 2 bad row(s) of --input, at line(s) 3, 5" in result.stderr


def test_one_bad_row_past_the_limit_fails_naming_the_option(exported, tmp_path):
    _, model_dir = exported
    source, out = _input(tmp_path, ROWS), tmp_path / "predictions.csv"
    result = _cli("predict", "--saved-model", model_dir, "--input", str(source), "--output", str(out),
                  "--max-bad-records", "1")
    assert result.returncode == 1 and not out.exists()
    assert "2 bad row(s) in --input, more than --max-bad-records=1" in result.stderr
    assert "give --max-bad-records N to skip up to N bad rows" in result.stderr


def test_text_in_a_numeric_input_names_the_fix(exported, tmp_path):
    _, model_dir = exported
    source = _input(tmp_path, ["1,setosa,3.5,1.4,0.2"])
    result = _cli("predict", "--saved-model", model_dir, "--input", str(source))
    assert result.returncode == 1
    assert "input 'a' = 'setosa' is not a valid float32, the dtype the SavedModel takes for it" in result.stderr
    assert "declared with the wrong dtype in the conf the model was exported from" in result.stderr


def test_run_with_a_column_of_the_wrong_dtype_names_the_fix(tmp_path):
    (tmp_path / "train.csv").write_text("a,b,c,d,species\nlong,3.5,1.4,0.2,0\n")
    result = _cli("run", TINY, env={"TINY_DATA": str(tmp_path)})
    assert result.returncode == 2 or result.returncode == 3, result.stderr[-2000:]
    assert "field 'a' = 'long' is not a valid float32. If column 'a' holds text such as this, declare it with " \
           "dtype 'string' in the conf (Column.create('a', 'string'))" in result.stderr

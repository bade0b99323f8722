"""Columns, readers and the records they become: typed batches, bad-record handling."""

import gzip

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import Column, ConfError, ElasticReader, FileReader, ReaderError
from elastimator.data import DataSetInput, DataSetSpec


def _spec(reader, columns, **kwargs):
    kwargs.setdefault("batch_size", 4)
    return DataSetSpec(reader=reader, columns=columns, name="train_set", **kwargs)


def _rows(data_input):
    features, labels = [], []
    for f, l in data_input():
        features.append({k: (v if isinstance(v, tf.SparseTensor) else v.numpy()) for k, v in f.items()})
        labels.extend(l.numpy().tolist())
    return features, labels


XY = [Column.create("x", "float32"), Column.create("y", "float32", is_label=True)]


def test_column_dtypes_and_aliases():
    assert Column.create("a", "int").dtype == tf.int64  # "int" is int64, never int8
    assert Column.create("a", "float").dtype == tf.float32
    assert Column.create("a", "str").dtype == tf.string
    assert Column.create("a", np.int32).dtype == tf.int32
    assert Column.create("a", tf.float64).dtype == tf.float64
    with pytest.raises(ConfError, match="Column 'C3': expected dtype one of float32, float64, int32, int64, string"
                                        ".*got 'flaot32'"):
        Column.create("C3", "flaot32")
    with pytest.raises(ConfError, match="default for int64 must be an int"):
        Column.create("a", "int", default="zero")
    with pytest.raises(ConfError, match="name must be a non-empty string"):
        Column.create("", "int")


def test_columns_as_a_whole():
    with pytest.raises(ConfError, match=r"column names must be unique; \['x'\] declared more than once"):
        _spec(FileReader("x"), [XY[0], XY[0], XY[1]])
    with pytest.raises(ConfError, match="no label column"):
        _spec(FileReader("x"), [XY[0]])
    with pytest.raises(ConfError, match=r"exactly one column may have is_label=True; got \['a', 'b'\]"):
        _spec(FileReader("x"), [XY[0], Column.create("a", "int", is_label=True),
                                Column.create("b", "int", is_label=True)])


def test_file_reader_reads_globs_directories_gzip_and_headers(tmp_path):
    (tmp_path / "a.csv").write_text("x,y\n1,2\n3,4\n")
    (tmp_path / "b.csv").write_text("x,y\n5,6\n")
    with gzip.open(tmp_path / "c.csv.gz", "wt") as f:
        f.write("x,y\n7,8\n9,10\n")
    glob_reader = FileReader(str(tmp_path / "*.csv"), skip_header=True)
    assert glob_reader.count_data() == 3
    assert glob_reader.read_data_by_index_range(1, 3) == ["3,4", "5,6"]
    _, labels = _rows(DataSetInput(_spec(glob_reader, XY)))
    assert labels == [2.0, 4.0, 6.0]
    gz = FileReader(str(tmp_path / "c.csv.gz"), skip_header=True)
    assert gz.count_data() == 2 and _rows(DataSetInput(_spec(gz, XY)))[1] == [8.0, 10.0]
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "part-0.tsv").write_text("1\t2\n")
    tsv = FileReader(str(tmp_path / "dir"))
    assert tsv.field_delim == "\t" and _rows(DataSetInput(_spec(tsv, XY)))[1] == [2.0]


def test_count_data_is_cheap_and_exact_without_a_final_newline(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("\n".join(f"{i},{i}" for i in range(100_000)))  # no trailing newline
    assert FileReader(str(path)).count_data() == 100_000


def test_missing_files_and_empty_data(tmp_path):
    with pytest.raises(ReaderError, match="no file matches .*nothing-here.*Check the path"):
        FileReader(str(tmp_path / "nothing-here*.csv")).files
    (tmp_path / "empty.csv").write_text("x,y\n")
    empty = DataSetInput(_spec(FileReader(str(tmp_path / "empty.csv"), skip_header=True), XY))
    with pytest.raises(ReaderError, match="has no records"):
        empty.check()


def test_records_are_located_by_file_and_line_across_files_and_headers(tmp_path):
    """What a bad record's message names when the shard service hands out global record indices."""
    (tmp_path / "a.csv").write_text("x,y\n1,2\n3,4\n")
    (tmp_path / "b.csv").write_text("5,6\n7,8\n9,10\n")
    reader = FileReader(str(tmp_path / "*.csv"))
    files, lines = reader.locate(np.arange(5))
    assert files.numpy().tolist() == [0, 0, 1, 1, 1] and lines.numpy().tolist() == [2, 3, 1, 2, 3]


def test_header_mistake_is_caught_before_training(tmp_path):
    (tmp_path / "h.csv").write_text("x,y\n1,2\n")
    with pytest.raises(ReaderError, match=r"field 'x' = 'x' is not a valid float32.*skip_header=True"):
        DataSetInput(_spec(FileReader(str(tmp_path / "h.csv"), skip_header=False), XY)).check()
    with pytest.raises(ReaderError, match=r"has 1 field\(s\) separated by '\\t' but 3 columns"):
        DataSetInput(_spec(FileReader(str(tmp_path / "h.csv"), skip_header=True),
                           XY + [Column.create("z", "int")], field_delim="\t")).check()


def test_a_block_of_records_is_the_records_joined_by_newlines_across_files_line_endings_and_gzip(tmp_path):
    # What the elastic input reads per batch, and splits in the pipeline: it must split into exactly the records.
    (tmp_path / "a.csv").write_bytes(b"x,y\r\n1,2\r\n,\r\n3,4\r\n")  # CRLF, an empty-valued record
    (tmp_path / "b.csv").write_bytes(b"5,6\n\n7,8")  # an empty record, no newline at the end
    with gzip.open(tmp_path / "c.csv.gz", "wb") as f:
        f.write(b"9,10\n11,12\n")
    reader = FileReader([str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), str(tmp_path / "c.csv.gz")],
                        skip_header=None)
    n = reader.count_data()
    assert n == 8
    for start in range(n):
        for end in range(start + 1, n + 1):
            assert reader.read_block(start, end).split(b"\n") == reader.read_lines(start, end), (start, end)
    assert reader.read_lines(0, n) == [b"1,2", b",", b"3,4", b"5,6", b"", b"7,8", b"9,10", b"11,12"]


def test_a_first_line_that_is_not_a_record_is_a_header_and_one_that_is_a_record_is_trained(tmp_path, caplog):
    # DLRover's example: a header whose names differ from the columns, and a headerless part beside it.
    (tmp_path / "part-0.csv").write_text("label,i1,c1\n1,5,a\n0,,b\n")
    (tmp_path / "part-1.csv").write_text("0,7,c\n1,8,d\n")
    columns = [Column.create("I0", "int32", is_label=True), Column.create("I1", "float32"),
               Column.create("C1", "string")]
    reader = FileReader(str(tmp_path / "part-*.csv"))
    data = DataSetInput(_spec(reader, columns))
    caplog.set_level("INFO", logger="elastimator")
    assert reader.headers == [1, 0] and reader.count_data() == 4
    features, labels = _rows(data)
    assert labels == [1, 0, 0, 1]  # no record dropped, the header not trained
    assert [v for batch in features for v in batch["I1"].tolist()] == [5.0, 0.0, 7.0, 8.0]
    assert any("part-0.csv is a header (field 'I0' = 'label' is not a valid int32)" in r.getMessage()
               for r in caplog.records)
    assert reader.read_data_by_index_range(0, 4) == ["1,5,a", "0,,b", "0,7,c", "1,8,d"]
    # A line that names the columns is a header even when every column is a string.
    (tmp_path / "names.csv").write_text("a,b\nx,y\n")
    strings = [Column.create("a", "string"), Column.create("b", "string", is_label=True)]
    names = FileReader(str(tmp_path / "names.csv"))
    _spec(names, strings)
    assert names.headers == [1]
    # Alone (no columns), a header is a non-number above a number; explicit settings always win.
    assert FileReader(str(tmp_path / "part-0.csv")).headers == [1]
    assert FileReader(str(tmp_path / "part-1.csv")).headers == [0]
    assert FileReader(str(tmp_path / "part-1.csv"), skip_header=True).count_data() == 1


def test_empty_numeric_fields_take_the_default_and_are_counted_per_column(tmp_path):
    (tmp_path / "e.csv").write_text("1,,x,1\n,2.5,,0\n,,y,\n")
    columns = [Column.create("a", "int64"), Column.create("b", "float32", default=-1.0),
               Column.create("s", "string"), Column.create("label", "int32", is_label=True)]
    data = DataSetInput(_spec(FileReader(str(tmp_path / "e.csv")), columns))
    data.check()
    features, labels = _rows(data)
    assert features[0]["a"].tolist() == [1, 0, 0] and features[0]["b"].tolist() == [-1.0, 2.5, -1.0]
    assert features[0]["s"].tolist() == [b"x", b"", b"y"] and labels == [1, 0, 0]
    assert data.filled.counts == {"a": 2, "b": 2, "label": 1} and data.tally.count == 0
    # Text in a numeric field is still a located error, never a number.
    (tmp_path / "t.csv").write_text("1,2,x,1\nabc,2,x,1\n")
    bad = DataSetInput(_spec(FileReader(str(tmp_path / "t.csv"), skip_header=False), columns, max_bad_records=1))
    _rows(bad)
    assert bad.tally.examples == [f"{tmp_path / 't.csv'}:2: field 'a' = 'abc' is not a valid int64"]


def test_typed_features_defaults_and_sparse_columns(tmp_path):
    (tmp_path / "d.csv").write_text("1.5,,a,3|4,1\n2.5,7,,,0\n")
    columns = [Column.create("f", "float32"), Column.create("i", "int", default=-1),
               Column.create("s", "string", default="none"), Column.create("tags", "int", is_sparse=True),
               Column.create("label", "int32", is_label=True)]
    features, labels = _rows(DataSetInput(_spec(FileReader(str(tmp_path / "d.csv")), columns)))
    batch = features[0]
    assert batch["f"].tolist() == [1.5, 2.5] and batch["f"].dtype == np.float32
    assert batch["i"].tolist() == [-1, 7] and batch["i"].dtype == np.int64
    assert batch["s"].tolist() == [b"a", b"none"]
    tags = batch["tags"]
    assert tags.values.numpy().tolist() == [3, 4] and tags.indices.numpy().tolist() == [[0, 0], [0, 1]]
    assert labels == [1, 0]


def test_bad_records_are_reported_with_file_and_line_and_skipped_within_tolerance(tmp_path, caplog):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"1,2\n3,x\n5,6,7\n8,9\n\xff\xfe,1\n10,11\n")
    columns = [Column.create("s", "string"), Column.create("y", "float32", is_label=True)]
    data = DataSetInput(_spec(FileReader(str(path)), columns, max_bad_records=3))
    features, labels = _rows(data)
    assert labels == [2.0, 9.0, 11.0]  # nothing bad became a number
    assert data.tally.count == 3
    # Batches are parsed in parallel, so reports arrive in any order.
    assert sorted(data.tally.examples) == [
        f"{path}:2: field 'y' = 'x' is not a valid float32",
        f"{path}:3: expected 2 fields, got 3",
        f"{path}:5: not valid UTF-8",
    ]


def test_too_many_bad_records_stop_the_input(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,2\n3,x\n4,y\n")
    data = DataSetInput(_spec(FileReader(str(path)), XY, max_bad_records=1))
    with pytest.raises(tf.errors.OpError, match="more than max_bad_records=1"):
        _rows(data)
    assert isinstance(data.failure, ReaderError) and data.tally.count == 2


class SquaresReader(ElasticReader):
    """A seed-001 style reader: count_data stores _data_nums instead of returning it."""

    def count_data(self):
        self._data_nums = 10

    def read_data_by_index_range(self, start_index, end_index):
        return [f"{i},{i * i}" for i in range(start_index, end_index)]


def test_elastic_reader_reads_its_whole_range_without_a_shard_service():
    data = DataSetInput(_spec(SquaresReader(path="squares"), XY, epoch=2))
    data.check()
    _, labels = _rows(data)
    assert labels == [float(i * i) for i in range(10)] * 2


class StreamReader:
    """A seed-001 style non-elastic reader: anything with iterator()."""

    def __init__(self, n):
        self.n = n

    def iterator(self):
        for i in range(self.n):
            yield f"{i},{-i}"


def test_iterator_reader():
    _, labels = _rows(DataSetInput(_spec(StreamReader(6), XY)))
    assert labels == [0.0, -1.0, -2.0, -3.0, -4.0, -5.0]


class FailingReader(ElasticReader):
    def count_data(self):
        return 8

    def read_data_by_index_range(self, start_index, end_index):
        if start_index >= 4:
            raise OSError("disk went away")
        return [f"{i},{i}" for i in range(start_index, end_index)]


def test_a_reader_that_raises_is_reported_with_its_context():
    data = DataSetInput(_spec(FailingReader("remote"), XY))
    with pytest.raises(tf.errors.OpError):
        _rows(data)
    assert isinstance(data.failure, ReaderError)
    assert "read_data_by_index_range(4, 8) raised OSError('disk went away')" in str(data.failure)


def test_records_must_be_delimited_strings():
    class Tuples:
        def iterator(self):
            yield (1.0, 2.0)

    data = DataSetInput(_spec(Tuples(), XY))
    with pytest.raises(tf.errors.OpError):
        _rows(data)
    assert "expected each record as one delimited string" in str(data.failure)


def test_reader_type_is_checked():
    with pytest.raises(ReaderError, match="'reader' must be an ElasticReader"):
        _spec(["1,2"], XY)


def test_label_column_never_enters_the_serving_signature(tmp_path):
    from elastimator.data import serving_input_receiver_fn

    with tf.Graph().as_default():
        receiver = serving_input_receiver_fn(XY + [Column.create("t", "string", is_sparse=True)])()
    assert sorted(receiver.receiver_tensors) == ["t", "x"]
    assert isinstance(receiver.features["t"], tf.SparseTensor)


def test_shuffled_file_input_keeps_every_record(tmp_path):
    (tmp_path / "n.csv").write_text("".join(f"{i},{i}\n" for i in range(50)))
    _, labels = _rows(DataSetInput(_spec(FileReader(str(tmp_path / "n.csv")), XY, shuffle=True,
                                         shuffle_buffer_size=20)))
    assert sorted(labels) == [float(i) for i in range(50)] and labels != sorted(labels)


def test_top_level_names_for_dlrover_users():
    assert est.Column is Column and est.FileReader is FileReader and est.ElasticReader is ElasticReader

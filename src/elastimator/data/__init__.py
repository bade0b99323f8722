"""Columns, readers, and the tf.data pipelines a job conf's data sets become."""

from elastimator.data.column import Column
from elastimator.data.dataset import DataSetInput, DataSetSpec, serving_input_receiver_fn
from elastimator.data.file_reader import FileReader
from elastimator.data.reader import ElasticReader

__all__ = ["Column", "DataSetInput", "DataSetSpec", "ElasticReader", "FileReader", "serving_input_receiver_fn"]

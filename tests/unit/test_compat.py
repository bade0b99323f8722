"""elastimator.compat: tf.estimator imports resolve to elastimator, and unedited scripts run."""

import sys

import numpy as np

import pytest
import tensorflow as tf

import elastimator
import elastimator.compat


@pytest.fixture
def installed():
    elastimator.compat.install()
    yield
    elastimator.compat.uninstall()


def test_every_import_form_reaches_elastimator(installed):
    import tensorflow_estimator as tfe  # noqa: F401  # pylint: disable=import-outside-toplevel
    from tensorflow.python.estimator.canned.head import _Head  # pylint: disable=import-outside-toplevel
    from tensorflow_estimator.python.estimator.canned.optimizers import (  # pylint: disable=import-outside-toplevel
        get_optimizer_instance,
    )

    assert tf.estimator.Estimator is elastimator.Estimator
    assert tf.compat.v1.estimator.inputs.numpy_input_fn is elastimator.inputs.numpy_input_fn
    assert tf.estimator.DNNClassifier is elastimator.DNNClassifier
    assert tfe.estimator.RunConfig is elastimator.RunConfig
    assert tf.estimator.export.PredictOutput is elastimator.export.PredictOutput
    assert isinstance(get_optimizer_instance("Adagrad", 0.1), tf.compat.v1.train.AdagradOptimizer)
    assert _Head.__abstractmethods__ == {"name", "logits_dimension", "create_loss", "create_estimator_spec"}


def test_unserved_private_module_fails_with_a_pointer(installed):
    with pytest.raises(ModuleNotFoundError, match="not provided by elastimator.compat.*docs/migration.md"):
        import tensorflow_estimator.python.estimator.canned.boosted_trees  # noqa: F401  # pylint: disable=import-outside-toplevel


def test_uninstall_removes_every_name():
    elastimator.compat.install()
    elastimator.compat.install()  # idempotent
    elastimator.compat.uninstall()
    assert not hasattr(tf, "estimator") and not hasattr(tf.compat.v1, "estimator")
    assert "tensorflow_estimator" not in sys.modules and not elastimator.compat.installed()


def test_uninstall_takes_tf_keras_estimator_back_from_keras_loaded_meanwhile():
    elastimator.compat.install()
    ours = tf.keras.estimator
    assert tf.compat.v1.keras.estimator is ours and tf.keras.estimator.model_to_estimator is (
        elastimator.keras.model_to_estimator)
    elastimator.compat.uninstall()
    # tf-keras has a tf.keras.estimator of its own (it needs tf.estimator); Keras 3 has none
    assert getattr(tf.keras, "estimator", None) is not ours
    assert getattr(tf.compat.v1.keras, "estimator", None) is not ours


def test_dlrover_trainer_paths_resolve_when_dlrover_is_not_installed(installed, tmp_path):
    from dlrover.trainer.tensorflow.reader.base_reader import ElasticReader  # pylint: disable=import-outside-toplevel
    from dlrover.trainer.tensorflow.reader.file_reader import FileReader  # pylint: disable=import-outside-toplevel
    from dlrover.trainer.tensorflow.util.column_info import Column  # pylint: disable=import-outside-toplevel
    from dlrover.trainer.util.log_util import default_logger  # pylint: disable=import-outside-toplevel

    assert issubclass(Column, elastimator.Column) and issubclass(ElasticReader, elastimator.ElasticReader)
    # is_sparse was a note DLRover's parser never read: the field is one value, as there.
    c1 = Column.create(name="C1", dtype="string", is_sparse=True, is_label=False)
    assert type(c1) is elastimator.Column and c1 == elastimator.Column.create("C1", "string")
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    reader = FileReader(str(tmp_path / "a.csv"), 1, 64)  # DLRover's positional (file, num_epochs, batch_size)
    assert isinstance(reader, elastimator.FileReader) and reader.skip_header is None
    assert default_logger.name == "dlrover.trainer"

    class Fake(ElasticReader):  # seed 001's reader: count_data sets _data_nums
        def __init__(self, path=None):
            self.count = 1
            super().__init__(path=path)

        def count_data(self):
            self._data_nums = 10

        def read_data_by_index_range(self, start_index, end_index):
            return [f"{i},{2 * i}" for i in range(start_index, end_index)]

    assert Fake("fake://x").data_nums == 10
    with pytest.raises(ModuleNotFoundError, match="dlrover.python is not provided by elastimator.compat"):
        import dlrover.python.master  # noqa: F401  # pylint: disable=import-outside-toplevel


def test_v1_canned_estimators_sum_losses_and_keras_estimator_resolves(installed, tmp_path):
    v1 = tf.compat.v1.estimator.DNNClassifier([4], [tf.feature_column.numeric_column("x")],
                                              model_dir=str(tmp_path / "v1"), input_layer_partitioner=None)
    reduction = tf.compat.v1.losses.Reduction
    assert isinstance(v1, elastimator.DNNClassifier) and v1.head.loss_reduction == reduction.SUM
    v2 = tf.estimator.DNNClassifier([4], [tf.feature_column.numeric_column("x")], model_dir=str(tmp_path / "v2"))
    assert v2.head.loss_reduction == "sum_over_batch_size"  # as given, as 2.15 reported it
    assert tf.keras.estimator.model_to_estimator is elastimator.keras.model_to_estimator
    assert tf.estimator.LinearEstimator is elastimator.LinearEstimator


def _partitions(estimator) -> list[str]:
    """The partitioned model variables in the graph of the estimator's newest checkpoint."""
    with tf.Graph().as_default():
        tf.compat.v1.train.import_meta_graph(estimator.latest_checkpoint() + ".meta")
        return sorted(v.name for v in tf.compat.v1.global_variables()
                      if "/part_" in v.name and not any(slot in v.name for slot in ("Adagrad", "Ftrl")))


def test_v1_partitioners_split_the_input_variables_as_2_15_did(installed, tmp_path):
    ids = tf.feature_column.categorical_column_with_identity("id", 40)
    x = np.arange(32, dtype=np.int64).reshape(-1, 1)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"id": x}, x % 2)).batch(8)

    three = tf.compat.v1.fixed_size_partitioner(3)
    linear = tf.compat.v1.estimator.LinearClassifier(
        [ids], str(tmp_path / "linear"), 2, None, None, "Ftrl", None, three)  # positionally, as v1 programs may
    dnn = tf.compat.v1.estimator.DNNClassifier([4], [tf.feature_column.embedding_column(ids, 4)],
                                               model_dir=str(tmp_path / "dnn"), input_layer_partitioner=three)
    for estimator in (linear, dnn):
        estimator.train(input_fn, steps=2)
    # What tf.estimator 2.15 made of the same programs (its graphs, read the same way).
    assert _partitions(linear) == ["linear/linear_model/bias_weights/part_0:0"] + [
        f"linear/linear_model/id/weights/part_{i}:0" for i in range(3)]
    assert _partitions(dnn) == [
        f"dnn/input_from_feature_columns/input_layer/id_embedding/embedding_weights/part_{i}:0" for i in range(3)]

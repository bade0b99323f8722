# The smoke subset: the tests scripts/smoke_tf.sh runs on another TensorFlow release and scripts/nightly_check.sh
# on tf-nightly (sourced by both).
SMOKE_TESTS=(
  tests/unit/test_public_api.py tests/unit/test_tensorflow_import.py tests/unit/test_train.py
  tests/unit/test_evaluate_predict.py tests/unit/test_train_and_evaluate.py tests/unit/test_export.py
  tests/unit/test_embedding_variables.py tests/unit/test_api_reference.py tests/unit/test_multi_step.py tests/unit/test_rnn.py tests/unit/test_sdca.py
  tests/unit/test_line_native.py tests/unit/test_kept_graph_start.py tests/unit/test_warm_graphs.py tests/unit/test_kept_graph.py
  tests/unit/test_tf_internals.py
  tests/integration/test_cli.py tests/integration/test_quiet_start.py
)

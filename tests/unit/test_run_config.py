"""RunConfig defaults, validation, replace() and TF_CONFIG parsing."""

import json

import pytest
import tensorflow as tf

from elastimator import ConfigError, RunConfig, TaskType

CLUSTER = {"chief": ["localhost:1000"], "worker": ["localhost:1001", "localhost:1002"], "ps": ["localhost:1003"]}


def test_defaults_match_tf_estimator():
    config = RunConfig(tf_config={})
    assert config.save_checkpoints_secs == 600 and config.save_checkpoints_steps is None
    assert (config.save_summary_steps, config.keep_checkpoint_max, config.log_step_count_steps) == (100, 5, 100)
    assert config.keep_checkpoint_every_n_hours == 10000
    assert config.session_creation_timeout_secs == 7200
    assert (config.task_type, config.task_id, config.is_chief, config.master) == ("worker", 0, True, "")
    assert (config.num_ps_replicas, config.num_worker_replicas) == (0, 1)


def test_checkpoint_frequencies_are_exclusive():
    assert RunConfig(save_checkpoints_steps=10).save_checkpoints_secs is None
    assert RunConfig(save_checkpoints_secs=5).save_checkpoints_steps is None
    with pytest.raises(ConfigError, match="exclusive.*Set only one"):
        RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=5)
    none = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    assert none.save_checkpoints_steps is None and none.save_checkpoints_secs is None


def test_replace_switches_checkpoint_frequency_and_keeps_cluster():
    config = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "worker", "index": 1}})
    replaced = config.replace(save_checkpoints_steps=50, keep_checkpoint_max=2)
    assert (replaced.save_checkpoints_steps, replaced.save_checkpoints_secs) == (50, None)
    assert replaced.keep_checkpoint_max == 2 and replaced.task_id == 1
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['save_steps'\]"):
        config.replace(save_steps=3)


@pytest.mark.parametrize("field, value, message", [
    ("keep_checkpoint_max", -1, "keep_checkpoint_max must be a non-negative int"),
    ("save_summary_steps", "100", "save_summary_steps must be a non-negative int"),
    ("device_fn", "cpu", "device_fn must be callable"),
    ("session_config", {"allow_soft_placement": True}, "session_config must be a tf.compat.v1.ConfigProto"),
    ("train_distribute", object(), "train_distribute expected a tf.distribute.Strategy or None; got object"),
])
def test_bad_fields_are_named(field, value, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**{field: value})


def test_chief_worker_ps_roles():
    chief = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "chief", "index": 0}})
    assert chief.is_chief and chief.master == "grpc://localhost:1000" and chief.global_id_in_cluster == 0
    assert (chief.num_ps_replicas, chief.num_worker_replicas) == (1, 3)
    worker = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "worker", "index": 1}})
    assert not worker.is_chief and worker.master == "grpc://localhost:1002"
    # chief first, then the other roles in name order: ps (1), worker (2, 3).
    assert worker.global_id_in_cluster == 3
    ps = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "ps", "index": 0}})
    assert ps.task_type == TaskType.PS and not ps.is_chief and ps.global_id_in_cluster == 1
    assert isinstance(worker.cluster_spec, tf.train.ClusterSpec)
    assert worker.cluster_spec.as_dict()["worker"] == CLUSTER["worker"]


def test_evaluator_sits_outside_the_cluster():
    config = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "evaluator", "index": 0}})
    assert config.task_type == "evaluator" and not config.is_chief and config.master == ""
    assert config.effective_device_fn() is None


def test_tf_config_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}))
    assert RunConfig().master == "grpc://localhost:1001"


@pytest.mark.parametrize("tf_config, message", [
    ({"cluster": CLUSTER}, '"task" has no "type"'),
    ({"cluster": CLUSTER, "task": {"type": "trainer", "index": 0}}, "unknown task type 'trainer'"),
    ({"cluster": {**CLUSTER, "gpu": ["h:1"]}, "task": {"type": "chief"}}, "unknown role 'gpu'"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": 2}}, "index 2 is out of range"),
    ({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}}, 'exactly one "chief"'),
    ({"cluster": CLUSTER, "task": {"type": "evaluator", "index": 1}}, "index must be 0"),
    ({"cluster": {**CLUSTER, "evaluator": ["h:9"]}, "task": {"type": "evaluator"}}, "must not be listed"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": -1}}, "non-negative integer"),
    ({"clutser": CLUSTER}, r"unknown top-level keys \['clutser'\]"),
])
def test_bad_tf_config_says_what_and_how_to_fix(tf_config, message):
    with pytest.raises(ConfigError, match=message) as info:
        RunConfig(tf_config=tf_config)
    assert "Expected a JSON object like" in str(info.value)


def test_tf_config_that_is_not_json(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{cluster: 1}")
    with pytest.raises(ConfigError, match="not valid JSON"):
        RunConfig()


def test_session_config_filters_devices_in_a_ps_cluster():
    worker = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "worker", "index": 1}})
    assert list(worker.effective_session_config().device_filters) == ["/job:ps", "/job:worker/task:1"]
    assert worker.effective_session_config().allow_soft_placement
    assert list(RunConfig(tf_config={}).effective_session_config().device_filters) == []
    mine = tf.compat.v1.ConfigProto(log_device_placement=True)
    assert RunConfig(session_config=mine).effective_session_config() is mine


def test_variables_go_to_ps_in_a_cluster():
    worker = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "worker", "index": 0}})
    with tf.Graph().as_default():
        with tf.compat.v1.device(worker.effective_device_fn()):
            variable = tf.compat.v1.get_variable("v", [1])
            op = tf.constant(1.0) + 1.0
    assert variable.device == "/job:ps/task:0"
    assert op.device == "/job:worker/task:0"


def test_a_one_replica_strategy_is_accepted_and_strategies_not_built_are_refused_with_what_to_do():
    import tensorflow as tf

    config = RunConfig(train_distribute=tf.distribute.MirroredStrategy(["/cpu:0"]))
    assert config.train_distribute.num_replicas_in_sync == 1

    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(ConfigError, match="TwoReplicas with 2 replicas; elastimator trains several replicas with "
                                          "MirroredStrategy or CentralStorageStrategy in one process"):
        RunConfig(train_distribute=TwoReplicas())
    with pytest.raises(ConfigError, match="eval_distribute is a TwoReplicas with 2 replicas"):
        RunConfig(eval_distribute=TwoReplicas())

    class TPUStrategyV2:
        num_replicas_in_sync = 8

    with pytest.raises(ConfigError, match="train_distribute is a TPUStrategyV2; elastimator runs no TPU. Use "
                                          "MirroredStrategy over this machine's devices"):
        RunConfig(train_distribute=TPUStrategyV2())

    class ParameterServerStrategyV2:  # TF2's, for Keras' ClusterCoordinator
        num_replicas_in_sync = 1

    with pytest.raises(ConfigError, match="TF2's ParameterServerStrategy, which a Keras-era ClusterCoordinator "
                                          "drives; an Estimator trains with parameter servers from TF_CONFIG"):
        RunConfig(train_distribute=ParameterServerStrategyV2())


def test_tf_config_service_reaches_run_config_as_tf_estimator_passed_it():
    """A TF_CONFIG with tf.estimator's "service" key was refused as unknown, and RunConfig.service never set."""
    service = {"type": "dataset", "address": "localhost:5050"}
    config = RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "chief", "index": 0}, "service": service})
    assert config.service == service and config.is_chief
    assert RunConfig(tf_config={"service": service}).service == service  # a local job too
    with pytest.raises(ConfigError, match='"service" must be a JSON object'):
        RunConfig(tf_config={"cluster": CLUSTER, "task": {"type": "chief", "index": 0}, "service": "x"})


def test_a_multi_worker_strategy_takes_a_cluster_of_workers_only_with_worker_0_the_chief():
    """tf.estimator's distribute coordinator ran TF_CONFIG clusters with no chief under MultiWorkerMirroredStrategy
    (its tutorial's), worker 0 leading; other clusters still need their chief."""

    class CollectiveAllReduceStrategy:  # named as tf.distribute.MultiWorkerMirroredStrategy's class is
        num_replicas_in_sync = 2

    workers = {"worker": ["localhost:2222", "localhost:2223"]}
    first = RunConfig(train_distribute=CollectiveAllReduceStrategy(),
                      tf_config={"cluster": workers, "task": {"type": "worker", "index": 0}})
    second = RunConfig(train_distribute=CollectiveAllReduceStrategy(),
                       tf_config={"cluster": workers, "task": {"type": "worker", "index": 1}})
    assert (first.is_chief, second.is_chief) == (True, False)
    assert first.num_worker_replicas == 2 and first.master == "grpc://localhost:2222"
    assert (first.global_id_in_cluster, second.global_id_in_cluster) == (0, 1)
    with pytest.raises(ConfigError, match='must have exactly one "chief" task'):
        RunConfig(tf_config={"cluster": workers, "task": {"type": "worker", "index": 0}})
    with pytest.raises(ConfigError, match='has no "ps" tasks'):
        RunConfig(train_distribute=CollectiveAllReduceStrategy(),
                  tf_config={"cluster": {**workers, "ps": ["localhost:2224"]}, "task": {"type": "worker", "index": 0}})
    with pytest.raises(ConfigError, match="eval_distribute is a CollectiveAllReduceStrategy over several processes"):
        RunConfig(eval_distribute=CollectiveAllReduceStrategy())

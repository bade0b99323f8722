"""Every benchmark runs at tiny size, so none can rot (no timing is asserted); several start processes of their
own, hence integration."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_engine_benchmark_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import engine_train

    result = engine_train.main(["--batch-size", "16", "--steps", "6", "--warmup", "2", "--runs", "1",
                                "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "engine_train.json").read_text())
    assert saved["runs"] == 1 and set(saved["median_steps_per_sec"]) == {"estimator", "tf_function"}
    assert saved["ratio_estimator_over_tf_function"] == pytest.approx(result["ratio_estimator_over_tf_function"])
    assert "Ratio estimator / tf.function" in (tmp_path / "engine_train.md").read_text()
    sys.modules.pop("engine_train", None)


@pytest.mark.slow
def test_reader_benchmark_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import reader_throughput

    result = reader_throughput.main(["--rows", "2000", "--runs", "1", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "reader_throughput.json").read_text())
    assert set(saved["median_records_per_sec"]) == {"file_reader", "csv_dataset"}
    assert saved["ratio_file_reader_over_csv_dataset"] == pytest.approx(result["ratio_file_reader_over_csv_dataset"])
    sys.modules.pop("reader_throughput", None)


@pytest.mark.slow
def test_frameworks_harness_runs_each_contender_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import frameworks

    # tf.estimator 2.15 needs its own virtualenv (created by the harness on a first full run); the smoke
    # test checks the harness and the contenders that run on this environment.
    result = frameworks.main(["--skip-tf-estimator", "--batch-size", "16", "--steps", "6", "--warmup", "2",
                              "--eval-batches", "2", "--runs", "1", "--out", str(tmp_path)])
    assert set(result["medians"]) == {"elastimator", "elastimator_unfused", "elastimator_one_step",
                                      "elastimator_own_hook", "elastimator_mirrored", "keras_fit", "tf_function"}
    for medians in result["medians"].values():
        assert medians["train_examples_per_sec"] > 0 and medians["peak_rss_mb"] > 0
        assert medians["rss_after_import_mb"] > 0 and medians["train_again_secs"] > 0 and medians["train_on_secs"] > 0
        assert medians["own_peak_rss_mb"] == pytest.approx(medians["peak_rss_mb"] - medians["rss_after_import_mb"])
    assert result["medians"]["elastimator"]["warm_predict_examples_per_sec"] > 0
    assert result["medians"]["elastimator"]["peak_rss_with_warm_predictor_mb"] >= (
        result["medians"]["elastimator"]["peak_rss_mb"])
    assert "elastimator / keras_fit train" in (tmp_path / "frameworks.md").read_text()
    mirrored = result["ratios"]["elastimator_mirrored / elastimator train"]
    assert mirrored["target"] == 0.95 and mirrored["round_min"] == mirrored["ratio"] == mirrored["round_max"]
    for verb in ("eval_again", "predict_again", "predict_single_again"):  # second calls, after more training
        assert result["medians"]["elastimator"][f"{verb}_examples_per_sec"] > 0
    assert result["medians"]["keras_fit"]["predict_again_examples_per_sec"] > 0
    sys.modules.pop("frameworks", None)


@pytest.mark.slow
def test_frameworks_against_a_revision_runs_that_code_beside_this(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import frameworks

    result = frameworks.main(["--skip-tf-estimator", "--only", "elastimator", "elastimator_before",
                              "--against", "HEAD", "--batch-size", "16", "--steps", "6", "--warmup", "2",
                              "--eval-batches", "2", "--runs", "1", "--out", str(tmp_path)])
    assert set(result["medians"]) == {"elastimator", "elastimator_before"}
    ratio = result["ratios"]["elastimator / elastimator_before eval_examples_per_sec"]
    assert ratio["ratio"] > 0 and ratio["target"] == "-"
    assert "| elastimator_before |" in (tmp_path / "frameworks.md").read_text()
    sys.modules.pop("frameworks", None)


def test_a_gpu_run_is_refused_where_tensorflow_sees_no_gpu(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import frameworks

    if frameworks.gpus_seen(sys.executable):
        pytest.skip("this machine's TensorFlow sees a GPU")
    with pytest.raises(SystemExit, match=r"--device gpu: the TensorFlow of .* sees no GPU .* so nothing was run"):
        frameworks.main(["--device", "gpu", "--skip-tf-estimator", "--only", "elastimator", "--out", str(tmp_path)])
    assert not (tmp_path / "frameworks.md").exists()
    sys.modules.pop("frameworks", None)


@pytest.mark.slow
def test_step_profile_splits_a_call(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import step_profile

    result = step_profile.main(["--skip-tf-estimator", "--steps", "60", "--traced", "2", "--out", str(tmp_path)])
    profile = result["profiles"]["elastimator"]
    assert profile["traced_steps"] == 2 and profile["untimed_calls"] > 10
    assert 0 < profile["kernel_running_ms"] <= profile["executor_span_ms"]
    assert profile["profiler_float_ops"] > 0 and profile["adam_elements"] == 2_356_334  # the DeepFM's variables
    assert profile["kernels_ms_by_op"]["ResourceApplyAdam"] > 0  # the fused update of every table
    assert "step FLOP/s / matmul peak" in (tmp_path / "step_profile.md").read_text()
    sys.modules.pop("step_profile", None)


@pytest.mark.slow
def test_shard_service_load_and_elastic_input_benchmarks(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import elastic_input
    import shard_service_load

    load = shard_service_load.main(["--clients", "4", "--shards", "200", "--out", str(tmp_path)])
    assert load["requests"] >= 400 and load["lost_or_duplicated_shards"] == 0
    # --against HEAD: the committed code trains beside the working tree's, from a worktree the run removes.
    cost = elastic_input.main(["--rows", "3000", "--batch-size", "32", "--steps", "12", "--warmup", "2", "--runs", "1",
                               "--rounds", "1", "--against", "HEAD", "--out", str(tmp_path)])
    compared = {"elastic", "elastic_remote", "elastic_grpc", "elastic_floor", "file_reader_again", "elastic@HEAD",
                "elastic_remote@HEAD"}
    assert set(cost["train_examples_per_sec"]) == {"file_reader", *compared}
    assert set(cost["rounds"][0]["cost"]) == compared
    assert "Side by side with the code of HEAD" in (tmp_path / "elastic_input.md").read_text()
    assert (tmp_path / "shard_service_load.md").exists()
    for name in ("elastic_input", "shard_service_load"):
        sys.modules.pop(name, None)


@pytest.mark.slow
def test_elastic_step_trace_benchmark_traces_the_elastic_steps_python_calls(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import elastic_step_trace

    result = elastic_step_trace.main(["--rows", "2000", "--batch-size", "32", "--warmup", "3", "--traced", "4",
                                      "--rounds", "1", "--floor-calls", "20", "--against", "HEAD",
                                      "--out", str(tmp_path)])
    figures = result["median_micros"]
    assert "shard_reports/settled duration" not in figures["file_reader"]
    # Each trainer's reports go into its report ring, and its gate is graph ops on the batch's lease, ending in the
    # Assert that every write waits for.
    assert "withdrawn_batch start" not in figures["file_reader"]
    for name in ("elastic", "elastic_remote", "elastic@HEAD", "elastic_remote@HEAD"):
        assert {"span", "withdrawn_batch start", "withdrawn_batch duration"} <= set(figures[name])
    assert set(result["numpy_function_floor_micros"]) == {"without", "with"}
    assert (tmp_path / "elastic_step_trace.md").exists()
    sys.modules.pop("elastic_step_trace", None)


@pytest.mark.slow
def test_elastic_cpu_benchmark_counts_each_inputs_threads_and_the_remote_service(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import elastic_cpu

    result = elastic_cpu.main(["--rows", "2000", "--batch-size", "32", "--warmup", "3", "--steps", "6",
                               "--rounds", "1", "--out", str(tmp_path)])
    figures = result["median_micros_per_step"]
    assert set(figures) == {"file_reader", "elastic", "elastic_remote"}
    for name, per_step in figures.items():
        assert per_step["wall"] > per_step["host"] > 0 and per_step["main"] > 0 and per_step["input_alone"] > 0
        assert (per_step["service"] > 0) == (name == "elastic_remote")  # only it has a service process
    assert "Over the plain pipeline's" in (tmp_path / "elastic_cpu.md").read_text()
    sys.modules.pop("elastic_cpu", None)


def test_shard_seals_benchmark_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import shard_seals

    result = shard_seals.main(["--shards", "100", "1000", "--workers", "4", "--listing-max", "100",
                               "--out", str(tmp_path)])
    small, large = result["rows"]
    assert "listing_bytes" in small and "listing_bytes" not in large
    assert large["seal_bytes"] < 2 * small["seal_bytes"]  # sizes, not times: a seal does not grow with the data
    assert (tmp_path / "shard_seals.md").exists()
    sys.modules.pop("shard_seals", None)


def test_report_line_cost_benchmark_counts_every_report_and_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import report_line_cost

    result = report_line_cost.main(["--connections", "5", "--rounds", "3", "--messages", "50", "--repeats", "2",
                                     "--out", str(tmp_path)])
    assert result["line_work_us_per_report"] >= 0 and result["tcp_loopback_us_per_message"] >= 0  # it ran (the book
    assert (result["native_line_work_us_per_report"] is None) == (report_line_cost.report_line_server._line_native is None)
    assert (tmp_path / "report_line_cost.md").exists()  # checked every report was counted), not how fast
    sys.modules.pop("report_line_cost", None)


def test_seal_hold_benchmark_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import seal_hold

    result = seal_hold.main(["--done", "50", "--workers", "20", "--seals", "2", "--rounds", "1", "--out", str(tmp_path)])
    (run,) = result["runs"]
    assert run["done_shards"] >= 50 and run["doing_shards"] >= 20 and run["reports"] > 0  # counts, not times
    assert set(run["lock_held_ms"]) == {"seal", "commit"}
    assert (tmp_path / "seal_hold.md").exists()
    sys.modules.pop("seal_hold", None)


@pytest.mark.slow
def test_embedding_gradient_benchmark_writes_its_results(tmp_path, monkeypatch):
    """Slow: four trainer processes, each importing TensorFlow."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import embedding_gradient

    result = embedding_gradient.main(["--batch-size", "16", "--steps", "3", "--warmup", "2", "--runs", "1",
                                      "--rounds", "1", "--out", str(tmp_path)])
    assert set(result["train_examples_per_sec"]) == set(embedding_gradient.TRAINERS)
    assert set(result["op_level_ms_per_update"]) == {"shipped", "copy_on_read", "unsorted_segment_sum"}
    assert set(result["speedup"]) == {"copy_on_read", "unsorted_segment_sum"}
    assert "Shipped over each choice undone" in (tmp_path / "embedding_gradient.md").read_text()
    sys.modules.pop("embedding_gradient", None)


def test_embedding_variables_benchmark_writes_its_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import embedding_variables

    result = embedding_variables.main(["--steps", "4", "--warmup", "2", "--runs", "1", "--batch-size", "16",
                                       "--optimizers", "adagrad", "--growth", "1000", "3000", "--out", str(tmp_path)])
    assert set(result["ratios"]) == {"adagrad"}
    assert [row["ids"] for row in result["growth"]] == [1000, 3000]  # every new id got a row of its own
    assert (tmp_path / "embedding_variables.md").exists()
    sys.modules.pop("embedding_variables", None)


@pytest.mark.slow
def test_scale_curves_benchmark_writes_its_table_and_plot(tmp_path, monkeypatch):
    """Slow: one `elastimator run` process (TensorFlow's import, a graph, an export) and one shard-service
    process."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    import scale_curves

    result = scale_curves.main(["--records", "2048", "--base", "2048", "--log-steps", "1", "--shards", "100",
                                "--cycles", "100", "--out", str(tmp_path)])
    assert [r["records"] for r in result["records"]] == [2048] and result["records"][0]["examples_per_sec"] > 0
    assert [r["shards"] for r in result["shards"]] == [100] and result["shards"][0]["peak_rss_mb"] > 0
    assert (tmp_path / "scale_curves.png").stat().st_size > 0
    assert "| 2,048 |" in (tmp_path / "scale_curves.md").read_text()
    sys.modules.pop("scale_curves", None)

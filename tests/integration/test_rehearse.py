"""`elastimator k8s rehearse` with real processes: manifests `k8s manifest` wrote (a TFJob, a JobSet, a synchronous
JobSet), run as pods in network namespaces of their own, to Succeeded or to a failure that names its cause; a pod
SIGKILLed mid-job restarted per its restart policy with no record lost. Root only (network namespaces)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.helpers import DLROVER_EXAMPLES

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CENSUS = "examples/census/census_conf.py:CensusConf"
COUNTING = "tests/integration/counting_conf.py:CountingConf"
RECORDS, EPOCHS = 1000, 2


def _cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "elastimator.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


def _manifest(tmp_path, conf, *args) -> list:
    path = tmp_path / "job.yaml"
    result = _cli("k8s", "manifest", conf, "--image", "img", "-o", str(path), *args)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(path.read_text()))


def _containers(documents):
    job = documents[-1]
    if job["kind"] == "TFJob":
        templates = [r["template"] for r in job["spec"]["tfReplicaSpecs"].values()]
    else:
        templates = [r["template"]["spec"]["template"] for r in job["spec"]["replicatedJobs"]]
    return [(t["spec"], t["spec"]["containers"][0]) for t in templates]


def _edit(documents, *, args=(), env=None, data=None):
    """Appends `args` to every command, `env` to every container, and mounts the host's `data` at /data."""
    for pod, container in _containers(documents):
        container["command"] = [*container["command"], *args]
        container["env"] = [*container["env"], *({"name": k, "value": v} for k, v in (env or {}).items())]
        if data:
            container.setdefault("volumeMounts", []).append({"name": "data", "mountPath": "/data"})
            pod.setdefault("volumes", []).append({"name": "data", "hostPath": {"path": str(data)}})
    return documents


def _rehearse(tmp_path, documents, *args, timeout=500):
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return _cli("k8s", "rehearse", str(path), "--work-dir", str(tmp_path / "work"), "--timeout", str(timeout),
                "--claim", f"model={tmp_path / 'claim'}", *args, timeout=timeout + 120)


def _checkpoint_steps(model_dir):
    return sorted(int(n[len("model.ckpt-"):-len(".index")]) for n in os.listdir(model_dir)
                  if n.startswith("model.ckpt-") and n.endswith(".index"))


def test_the_census_tfjob_rehearses_to_succeeded_with_its_checkpoints_on_the_claim(tmp_path):
    documents = _edit(_manifest(tmp_path, CENSUS, "--name", "census", "--ps", "1", "--workers", "2", "--evaluator",
                                "--pvc", "model"), args=("--max-steps", "60"))
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Succeeded: TFJob census successfully completed: its Chief succeeded." in result.stdout
    assert _checkpoint_steps(tmp_path / "claim")[-1] >= 60
    assert os.path.exists(tmp_path / "work" / "logs" / "default_census-worker-1" / "container" / "0.log")
    # The operator calls the job Succeeded with its chief and stops the evaluator: the chief waited for its export.
    assert os.listdir(tmp_path / "claim" / "export" / "best")


def test_the_census_jobset_rehearses_to_succeeded_with_an_export_on_the_claim(tmp_path):
    documents = _edit(_manifest(tmp_path, CENSUS, "--api", "jobset", "--name", "census", "--ps", "1", "--workers",
                                "2", "--evaluator", "--pvc", "model"), args=("--max-steps", "60"))
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Succeeded: JobSet census completed: successPolicy All of chief, evaluator" in result.stdout
    assert _checkpoint_steps(tmp_path / "claim")[-1] >= 60
    assert os.listdir(tmp_path / "claim" / "export" / "best")


def test_a_job_without_shared_storage_is_refused_with_the_fix(tmp_path):
    result = _cli("k8s", "manifest", CENSUS, "--image", "img", "--ps", "1", "--workers", "2")
    assert result.returncode == 2 and "share no checkpoints" in result.stderr and "--pvc" in result.stderr
    documents = _manifest(tmp_path, CENSUS, "--name", "census", "--ps", "1", "--workers", "2", "--pvc", "model")
    for pod, container in _containers(documents):
        del pod["volumes"], container["volumeMounts"]
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "keep model_dir /mnt/model each on its own disk" in result.stderr and "--pvc CLAIM" in result.stderr
    assert not (tmp_path / "work").exists()  # refused before anything ran


def test_a_hand_broken_port_fails_naming_the_pod_and_the_address(tmp_path):
    documents = _manifest(tmp_path, CENSUS, "--name", "census", "--ps", "1", "--workers", "2", "--pvc", "model")
    for _, container in _containers(documents):
        for entry in container["env"]:
            if entry["name"] == "ELASTIMATOR_SHARD_SERVICE":
                entry["value"] = "census-chief-0.default.svc:2299"
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("pod census-worker-1: ELASTIMATOR_SHARD_SERVICE names census-chief-0.default.svc:2299, which is pod "
            "census-chief-0, but it listens on 2222, 2223, 2224, not 2299") in result.stderr


def test_a_hand_broken_tf_config_fails_naming_the_pod_and_the_address(tmp_path):
    documents = _manifest(tmp_path, CENSUS, "--api", "jobset", "--name", "census", "--ps", "1", "--workers", "2",
                          "--pvc", "model")
    worker = next(r for r in documents[-1]["spec"]["replicatedJobs"] if r["name"] == "worker")
    config = {"cluster": {"ps": ["census-ps-0-0.census:2299"], "chief": ["census-chief-0-0.census:2222"],
                          "worker": ["census-worker-0-0.census:2222", "census-worker-0-1.census:2222"]},
              "task": {"type": "worker", "index": 0}}
    worker["template"]["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "TF_CONFIG", "value": json.dumps(config)})
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("pod census-worker-0-0: TF_CONFIG cluster.ps[0] names census-ps-0-0.census:2299, which is pod "
            "census-ps-0-0, but it listens on 2222, not 2299") in result.stderr


def test_a_conf_path_missing_from_the_image_fails_with_the_pods_own_words(tmp_path):
    documents = _manifest(tmp_path, CENSUS, "--name", "census", "--ps", "1", "--workers", "1", "--pvc", "model")
    for _, container in _containers(documents):
        container["command"] = [w.replace("examples/census/", "census/") for w in container["command"]]
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 1, result.stdout + result.stderr
    # exit 2 (usage) is permanent under ExitCode: the first pod that says so fails the job, not a backoffLimit later
    assert re.search(r"Failed: TFJob census has failed because \w+ replica census-\w+-0 failed \(exit code 2;",
                     result.stdout), result.stdout
    assert "conf file 'census/census_conf.py' does not exist (current directory: /job)" in result.stdout


def _alive(pgid: int) -> bool:
    """A process of the group still runs (a zombie, one whose parent died and which init has not reaped yet, is
    not running)."""
    table = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True).stdout.split("\n")
    return any(line.split()[0] == str(pgid) and not line.split()[1].startswith("Z") for line in table if line.strip())


def test_ctrl_c_stops_every_pod_group_and_removes_the_network(tmp_path):
    env, data = _counting(tmp_path, sync=False, step_secs="0.5")  # slow steps: it is still training when stopped
    documents = _edit(_manifest(tmp_path, COUNTING, "--name", "counting", "--ps", "1", "--workers", "1",
                                "--pvc", "model"), env=env, data=data)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    proc = subprocess.Popen([sys.executable, "-m", "elastimator.cli", "k8s", "rehearse", str(path), "--work-dir",
                             str(tmp_path / "work"), "--claim", f"model={tmp_path / 'claim'}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    try:
        state = tmp_path / "work" / "pods.json"
        deadline = time.monotonic() + 120
        while not (state.exists() and len(json.loads(state.read_text())) == 3):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        groups = [p["pgid"] for p in json.loads(state.read_text()).values()]
        assert all(_alive(g) for g in groups)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "Failed: interrupted: every pod stopped." in output
    assert not [g for g in groups if _alive(g)]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"elr{proc.pid}-" not in namespaces


def _counting(tmp_path, *, sync: bool, step_secs: str):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ids.csv").write_text("".join(f"{i},{i % 2}\n" for i in range(RECORDS)))
    return {"COUNT_DATA": "/data/ids.csv", "COUNT_RECORDS": str(RECORDS), "COUNT_MODEL_DIR": "/mnt/model",
            "COUNT_STEP_SECS": step_secs, **({"COUNT_SYNC": "1"} if sync else {})}, data


def _counts(model_dir):
    counts = tf.train.load_variable(tf.train.latest_checkpoint(str(model_dir)), "counts")
    return counts


def test_a_synchronous_jobset_rehearses_to_succeeded_with_no_ps(tmp_path):
    env, data = _counting(tmp_path, sync=True, step_secs="0")
    documents = _edit(_manifest(tmp_path, "tests/integration/counting_sync_conf.py:CountingSyncConf", "--api",
                                "jobset", "--name", "counting", "--workers", "1", "--pvc", "model"), env=env, data=data)
    assert [r["name"] for r in documents[-1]["spec"]["replicatedJobs"]] == ["chief", "worker"]
    result = _rehearse(tmp_path, documents)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Succeeded: JobSet counting completed" in result.stdout
    assert _counts(tmp_path / "claim").min() >= EPOCHS


def test_a_sigkilled_pod_restarts_per_its_policy_and_no_record_is_lost(tmp_path):
    env, data = _counting(tmp_path, sync=False, step_secs="0.05")
    documents = _edit(_manifest(tmp_path, COUNTING, "--name", "counting", "--ps", "1", "--workers", "2",
                                "--pvc", "model"), env=env, data=data)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    command = [sys.executable, "-m", "elastimator.cli", "k8s", "rehearse", str(path), "--work-dir",
               str(tmp_path / "work"), "--timeout", "500", "--claim", f"model={tmp_path / 'claim'}"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TF_CPP_MIN_LOG_LEVEL="2"))
    output = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout))
    reader.start()
    try:
        # The first checkpoint after step 0 (save_steps 40): training is under way, and far from its end.
        deadline = time.monotonic() + 400
        while not (os.path.isdir(tmp_path / "claim") and [s for s in _checkpoint_steps(tmp_path / "claim") if s]):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(output)
            time.sleep(0.2)
        pods = json.loads((tmp_path / "work" / "pods.json").read_text())
        os.killpg(pods["counting-worker-0"]["pgid"], signal.SIGKILL)
        assert proc.wait(timeout=600) == 0, "".join(output)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join()
    text = "".join(output)
    assert "pod counting-worker-0 exited with code 137" in text, text
    assert "restarting counting-worker-0 (a new pod: exit code 137, restartPolicy ExitCode)" in text
    assert "Succeeded: TFJob counting successfully completed" in text
    assert _counts(tmp_path / "claim").min() >= EPOCHS, text


@pytest.mark.parametrize("api", ["tfjob", "jobset"])
def test_a_crash_loop_with_no_progress_fails_the_job_after_its_budget_with_the_cause(tmp_path, api):
    """Every trainer fails at its first step (its progress file cannot be written: an OSError, exit 1 in elastimator,
    RETRY_EXIT 138 in a pod with a budget), so the controllers make new pods (ExitCode; a JobSet Job's Ignore
    rule) until a trainer's start finds no checkpoint newer than its previous start's twice (budget 1): it exits
    4, permanent, and the job fails, the summary naming the exit and the pod's log the budget. Which trainer runs
    out first is the machine's timing; that one does, after exactly its budget."""
    env, data = _counting(tmp_path, sync=False, step_secs="0")
    env["ELASTIMATOR_PROGRESS_FILE"] = "/no/such/dir/progress.json"
    documents = _edit(_manifest(tmp_path, COUNTING, "--name", "counting", "--ps", "1", "--workers", "1", "--api", api,
                                "--pvc", "model", "--max-restarts", "1"), env=env, data=data)
    result = _rehearse(tmp_path, documents, timeout=400)
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    if api == "tfjob":
        failed = re.search(r"TFJob counting has failed because (?:Chief|Worker) replica counting-(chief|worker)-0 "
                           r"failed \(exit code 4; exit code 1-127 is not retryable under ExitCode\)", text)
        pod = "counting-{}-0"
        restarted = "(a new pod: exit code 138, restartPolicy ExitCode)"
    else:
        failed = re.search(r"JobSet counting has failed: Job counting-(chief|worker)-0 failed: pod "
                           r"counting-(?:chief|worker)-0-0 exited 4, a FailJob rule of its podFailurePolicy "
                           r"\(reason PodFailurePolicy\), and its failurePolicy rule 'permanent-exit' fails", text)
        pod = "counting-{}-0-0"
        restarted = "(a new pod: exit code 138, restartPolicy Never; an Ignore rule"
    assert failed, text
    task = f"{failed.group(1)}-0"
    assert f"restarting {pod.format(failed.group(1))} {restarted}" in text, text
    assert f"{task} was restarted 2 time(s) with no progress between them" in text, text  # the end of its log
    assert f"delete /mnt/model/restarts/{task}.json" in text, text
    record = json.loads((tmp_path / "claim" / "restarts" / f"{task}.json").read_text())
    assert record["strikes"] == 2, record


def test_kills_past_the_budget_with_checkpoints_between_end_succeeded_with_no_record_lost(tmp_path):
    """Budget 0: a restart with no progress since would end the job. worker-0 is SIGKILLed twice, each time once its
    current pod has trained a step and the job has saved a checkpoint newer than the one that pod started from (its
    start record says both), so each new pod starts after progress: the budget comes back each time and the job
    succeeds."""
    env, data = _counting(tmp_path, sync=False, step_secs="1.0")  # slow steps: two kills fit before the end
    documents = _edit(_manifest(tmp_path, COUNTING, "--name", "counting", "--ps", "1", "--workers", "2",
                                "--pvc", "model", "--max-restarts", "0"), env=env, data=data)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    command = [sys.executable, "-m", "elastimator.cli", "k8s", "rehearse", str(path), "--work-dir",
               str(tmp_path / "work"), "--timeout", "900", "--claim", f"model={tmp_path / 'claim'}"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TF_CPP_MIN_LOG_LEVEL="2"))
    output = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout))
    reader.start()
    record_file = tmp_path / "claim" / "restarts" / "worker-0.json"

    def wait_for(condition):
        deadline = time.monotonic() + 600
        while not condition():
            assert proc.poll() is None and time.monotonic() < deadline, "".join(output)
            time.sleep(0.2)

    def record():
        try:
            return json.loads(record_file.read_text())
        except (OSError, ValueError):
            return {"checkpoint_step": "none yet"}

    def started_from():
        return record()["checkpoint_step"]

    try:
        previous = "none yet"
        for _ in range(2):
            wait_for(lambda: started_from() != previous)  # this pod's start is recorded
            previous = started_from()
            newer = -1 if previous is None else previous
            wait_for(lambda: record().get("stepped") and any(s > newer for s in _checkpoint_steps(tmp_path / "claim")))
            pods = json.loads((tmp_path / "work" / "pods.json").read_text())
            os.killpg(pods["counting-worker-0"]["pgid"], signal.SIGKILL)
        assert proc.wait(timeout=900) == 0, "".join(output)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join()
    text = "".join(output)
    assert text.count("pod counting-worker-0 exited with code 137") == 2, text
    assert "Succeeded: TFJob counting successfully completed" in text, text
    assert json.loads(record_file.read_text())["strikes"] == 0
    assert _counts(tmp_path / "claim").min() >= EPOCHS, text


@pytest.mark.skipif(not DLROVER_EXAMPLES.is_dir(), reason=f"DLRover's examples are expected at {DLROVER_EXAMPLES}")
def test_dlrovers_criteo_deeprec_elasticjob_converted_rehearses_to_succeeded(tmp_path):
    """DLRover's own manual_job.yaml, converted to a TFJob, in an image laid out as DLRover's Dockerfile lays it
    (examples/tensorflow/criteo_deeprec under the working directory; the command's `cd` into it), with the
    model's documented label fix (tests/compat_programs/test_dlrover_examples.py) named by its --conf."""
    from tests.compat_programs.test_dlrover_examples import _LABELS_AS_COLUMN_CONF

    image = tmp_path / "image"
    example = image / "examples" / "tensorflow" / "criteo_deeprec"
    shutil.copytree(DLROVER_EXAMPLES / "criteo_deeprec", example)
    (example / "labels_as_column_conf.py").write_text(_LABELS_AS_COLUMN_CONF)
    (image / "src").symlink_to(os.path.join(ROOT, "src"))  # the image's elastimator
    converted = _cli("k8s", "convert", str(DLROVER_EXAMPLES / "criteo_deeprec" / "manual_job.yaml"),
                     "-o", str(tmp_path / "job.yaml"))
    assert converted.returncode == 0, converted.stderr
    documents = list(yaml.safe_load_all((tmp_path / "job.yaml").read_text()))
    for _, container in _containers(documents):
        container["command"] = [w.replace("--conf=train_conf.TrainConf", "--conf=labels_as_column_conf.TrainConf")
                                for w in container["command"]]
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = _cli("k8s", "rehearse", str(path), "--image-root", str(image), "--work-dir", str(tmp_path / "work"),
                  "--timeout", "600", timeout=720)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Succeeded: TFJob deepctr-manual-scale successfully completed" in result.stdout
    model_dir = tmp_path / "work" / "claims" / "pvc-nas" / "deepctr"  # the conf's /nas/deepctr on the claim
    assert _checkpoint_steps(model_dir)[-1] > 0 and os.listdir(model_dir / "export")

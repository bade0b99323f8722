"""A TFJob's chief waits for the evaluator's final round (job/evaluator_done.py): the marker, the bounded wait, and
the manifests that ask for it (a TFJob with an evaluator; not a JobSet, whose successPolicy waits itself)."""

from elastimator.cluster import jobset, k8s
from elastimator.job import evaluator_done


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, secs):
        self.now += secs


def test_the_chief_waits_for_a_marker_of_its_final_step(tmp_path):
    clock = Clock()
    marks = iter([None, 80, 100])

    def sleep(secs):
        clock.sleep(secs)
        evaluator_done.mark(str(tmp_path), next(marks))

    assert evaluator_done.wait(str(tmp_path), 100, 60, clock=clock, sleep=sleep)
    assert clock.now == 3.0 and evaluator_done.evaluated_step(str(tmp_path)) == 100


def test_the_wait_is_bounded(tmp_path):
    clock = Clock()
    evaluator_done.mark(str(tmp_path), 40)  # an earlier job's round
    assert not evaluator_done.wait(str(tmp_path), 100, 5, clock=clock, sleep=clock.sleep)
    assert clock.now == 5.0


def _chief_env(documents):
    job = documents[-1]
    if job["kind"] == "TFJob":
        template = job["spec"]["tfReplicaSpecs"]["Chief"]["template"]
    else:
        chief = next(r for r in job["spec"]["replicatedJobs"] if r["name"] == "chief")
        template = chief["template"]["spec"]["template"]
    return {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}


def test_only_a_tfjob_with_an_evaluator_asks_its_chief_to_wait():
    spec = dict(name="census", conf="c.py", image="img", pvc="model")
    assert _chief_env(k8s.manifest(k8s.TFJobSpec(**spec, evaluator=True)))[evaluator_done.WAIT_ENV] == "900"
    assert evaluator_done.WAIT_ENV not in _chief_env(k8s.manifest(k8s.TFJobSpec(**spec)))
    assert evaluator_done.WAIT_ENV not in _chief_env(jobset.manifest(k8s.TFJobSpec(**spec, evaluator=True)))

"""What the training operator (TFJob) or the JobSet and Job controllers decide as rehearsed pods exit: restart a
container in place, create a pod anew, restart the whole JobSet, or call the job Succeeded or Failed. A
functional core: `Controller.exited` takes one exit and returns decisions as data; no processes, no clocks.

    Running --exit 0--> Succeeded          (OnFailure, Never, ExitCode; Always restarts)
    Running --exit n--> Running, restarted (OnFailure/Always: the kubelet, in place; ExitCode with n >= 128 or
                                            a JobSet pod with restartPolicy Never: a new pod)
                    --> Failed             (Never/ExitCode n < 128 in a TFJob; past the backoff limit)

TFJob (kubeflow/training-operator pkg/controller.v1/tensorflow/tfjob_controller.go UpdateJobStatus,
ReconcilePods; pkg/util/train/train_util.go IsRetryableExitCode; pkg/controller.v1/common/job.go
PastBackoffLimit): with a Chief (or Master) the job succeeds when all its replicas have; without, when worker
0 has (`successPolicy: AllWorkers`: every worker). A failed replica fails the job unless it restarts; restarts
of all pods together past `runPolicy.backoffLimit` fail it.

JobSet (kubernetes-sigs/jobset pkg/controllers/success_policy.go, failure_policy.go; a Job's own rule,
kubernetes pkg/controller/job: `backoffLimit`, default 6, counts its pods' failures): a Job completes when each
index has succeeded, and fails past its backoff limit; a failed Job restarts the whole JobSet while
`failurePolicy.maxRestarts` (default 0) allows, else the JobSet fails. A Job's `podFailurePolicy` (with
restartPolicy Never) may fail it at once (FailJob) or replace a pod without counting it (Ignore); a JobSet's
`failurePolicy.rules` may fail it for a Job's failure reason (FailJobSet). `successPolicy` (operator All, the
default, or Any, over `targetReplicatedJobs`, default all) says when it has succeeded.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from elastimator.cluster.rehearsal_pods import Pod, Workload

RUNNING, SUCCEEDED, FAILED = "Running", "Succeeded", "Failed"
JOB_BACKOFF_DEFAULT = 6
"""kubernetes pkg/apis/batch: a Job's default backoffLimit."""


@dataclasses.dataclass(frozen=True)
class Restart:
    pod: str
    new_pod: bool
    """True where the controller deletes the pod and creates another (new emptyDirs and disk)."""
    reason: str


@dataclasses.dataclass(frozen=True)
class RestartAll:
    reason: str


@dataclasses.dataclass(frozen=True)
class Done:
    succeeded: bool
    reason: str


def pod_failure_action(policy: dict | None, code: int) -> str | None:
    """A Job's `podFailurePolicy` for a pod whose container exited `code` (kubernetes pkg/controller/job
    pod_failure_policy.go matchPodFailurePolicy: the rules in order, the first whose onExitCodes match decides;
    onPodConditions rules never match here, a rehearsed pod has no disruption condition): FailJob, Ignore,
    Count, or None where no rule matches (counted, as Count)."""
    for rule in (policy or {}).get("rules") or []:
        requirement = rule.get("onExitCodes")
        if not requirement:
            continue
        inside = code in set(requirement.get("values") or [])
        if inside == (requirement.get("operator") == "In"):
            return rule.get("action")
    return None


def jobset_rule(rules: list, reason: str, rjob: str) -> dict | None:
    """The first JobSet failurePolicy rule that matches a Job of `rjob` failed for `reason` (kubernetes-sigs/jobset
    pkg/controllers/failure_policy.go: a rule matches when its onJobFailureReasons and targetReplicatedJobs, each
    where given, name them)."""
    for rule in rules:
        reasons, targets = rule.get("onJobFailureReasons"), rule.get("targetReplicatedJobs")
        if (not reasons or reason in reasons) and (not targets or rjob in targets):
            return rule
    return None


def retryable(code: int) -> bool:
    """training-operator pkg/util/train/train_util.go IsRetryableExitCode: 128 and above (a signal, e.g. 137
    after SIGKILL, 143 after SIGTERM) may be retried; 1-127 are the program's own errors."""
    return code >= 128


@dataclasses.dataclass
class PodState:
    phase: str = RUNNING
    restarts: int = 0
    generation: int = 0
    exit_codes: list[int] = dataclasses.field(default_factory=list)


class Controller:
    """The controller of one workload (see the module doc)."""

    def __init__(self, workload: Workload):
        self.workload = workload
        self.pods = {p.name: p for p in workload.pods}
        self.state = {p.name: PodState() for p in workload.pods}
        self.job_failures: dict[str, int] = {}
        self.jobset_restarts = 0
        self.result: Done | None = None

    def exited(self, name: str, code: int) -> list:
        """One pod's container exited with `code` (128 + n for signal n); returns the decisions."""
        if self.result is not None:
            return []
        pod, state = self.pods[name], self.state[name]
        state.exit_codes.append(code)
        if self.workload.kind == "TFJob":
            decisions = self._tfjob(pod, state, code)
        else:
            decisions = self._jobset(pod, state, code)
        done = next((d for d in decisions if isinstance(d, Done)), None)
        if done is not None:
            self.result = done
        return decisions

    # --- TFJob ---

    def _tfjob(self, pod: Pod, state: PodState, code: int) -> list:
        policy = pod.restart_policy
        if code == 0 and policy != "Always":
            state.phase = SUCCEEDED
            return self._tfjob_success()
        restart = policy in ("OnFailure", "Always") or (policy == "ExitCode" and retryable(code))
        if not restart:
            state.phase = FAILED
            why = ("exit code 1-127 is not retryable under ExitCode" if policy == "ExitCode"
                   else f"restartPolicy {policy}")
            return [Done(False, f"TFJob {self.workload.name} has failed because {pod.role} replica {pod.name} failed "
                                f"(exit code {code}; {why}).")]
        limit = (self.workload.spec.get("runPolicy") or {}).get("backoffLimit")
        total = sum(s.restarts for s in self.state.values())
        if limit is not None and total >= int(limit):
            state.phase = FAILED
            return [Done(False, f"TFJob {self.workload.name} has failed: pod {pod.name} exited {code} after {total} "
                                f"restart(s) in the job, its runPolicy.backoffLimit {limit}.")]
        state.restarts += 1
        new_pod = policy == "ExitCode"
        if new_pod:
            state.generation += 1
        return [Restart(pod.name, new_pod, f"exit code {code}, restartPolicy {policy}")]

    def _tfjob_success(self) -> list:
        roles = {p.role for p in self.pods.values()}
        chief = next((r for r in ("Chief", "Master") if r in roles), None)
        if chief is not None:
            names = [p.name for p in self.pods.values() if p.role == chief]
            why = f"its {chief} succeeded"
        elif self.workload.spec.get("successPolicy") == "AllWorkers":
            names = [p.name for p in self.pods.values() if p.role == "Worker"]
            why = "every worker succeeded (successPolicy AllWorkers)"
        else:
            names = [p.name for p in self.pods.values() if p.role == "Worker" and p.index == 0]
            why = "worker 0 succeeded"
        if names and all(self.state[n].phase == SUCCEEDED for n in names):
            return [Done(True, f"TFJob {self.workload.name} successfully completed: {why}.")]
        return []

    # --- JobSet ---

    def _jobset_spec(self, rjob: str) -> dict:
        for r in self.workload.spec.get("replicatedJobs") or []:
            if r.get("name") == rjob:
                return r.get("template", {}).get("spec", {})
        return {}

    def _jobset(self, pod: Pod, state: PodState, code: int) -> list:
        policy = pod.restart_policy
        if code == 0 and policy != "Always":
            state.phase = SUCCEEDED
            return self._jobset_success()
        job_spec = self._jobset_spec(pod.role)
        action = pod_failure_action(job_spec.get("podFailurePolicy"), code) if policy == "Never" else None
        if action == "FailJob":
            state.phase = FAILED
            return self._job_failed(pod, "PodFailurePolicy", f"Job {pod.job} failed: pod {pod.name} exited {code}, "
                                                             f"a FailJob rule of its podFailurePolicy")
        if action == "Ignore":
            state.restarts += 1
            state.generation += 1
            return [Restart(pod.name, True, f"exit code {code}, restartPolicy {policy}; an Ignore rule of Job "
                                            f"{pod.job}'s podFailurePolicy (not counted towards its backoffLimit)")]
        failures = self.job_failures[pod.job] = self.job_failures.get(pod.job, 0) + 1
        limit = int(job_spec.get("backoffLimit", JOB_BACKOFF_DEFAULT))
        if failures <= limit:
            state.restarts += 1
            new_pod = policy == "Never"
            if new_pod:
                state.generation += 1
            return [Restart(pod.name, new_pod, f"exit code {code}, restartPolicy {policy}; Job {pod.job} "
                                               f"failure {failures} of backoffLimit {limit}")]
        state.phase = FAILED
        return self._job_failed(pod, "BackoffLimitExceeded",
                                f"Job {pod.job} failed: pod {pod.name} exited {code}, past its backoffLimit {limit}")

    def _job_failed(self, pod: Pod, reason: str, why: str) -> list:
        """A Job failed for `reason` (the Job's condition reason): the JobSet's failurePolicy decides."""
        failure_policy = self.workload.spec.get("failurePolicy") or {}
        max_restarts = int(failure_policy.get("maxRestarts", 0))
        rule = jobset_rule(failure_policy.get("rules") or [], reason, pod.role)
        if rule is not None and rule.get("action") == "FailJobSet":
            return [Done(False, f"JobSet {self.workload.name} has failed: {why} (reason {reason}), and its "
                                f"failurePolicy rule {rule.get('name')!r} fails the JobSet.")]
        if self.jobset_restarts < max_restarts or (rule or {}).get("action") == "RestartJobSetAndIgnoreMaxRestarts":
            self.jobset_restarts += 1
            self.job_failures.clear()
            for s in self.state.values():
                s.phase, s.generation = RUNNING, s.generation + 1
            return [RestartAll(f"{why}; restart {self.jobset_restarts} of failurePolicy.maxRestarts "
                               f"{max_restarts}")]
        return [Done(False, f"JobSet {self.workload.name} has failed: {why}, and failurePolicy.maxRestarts "
                            f"{max_restarts} allows no more restarts.")]

    def job_complete(self, job: str) -> bool:
        pods = [p for p in self.pods.values() if p.job == job]
        return bool(pods) and all(self.state[p.name].phase == SUCCEEDED for p in pods)

    def _jobset_success(self) -> list:
        policy = self.workload.spec.get("successPolicy") or {}
        operator = policy.get("operator", "All")
        targets = policy.get("targetReplicatedJobs") or [r.get("name") for r in
                                                         self.workload.spec.get("replicatedJobs") or []]
        jobs = sorted({p.job for p in self.pods.values() if p.role in targets})
        complete = [self.job_complete(j) for j in jobs]
        if jobs and (all(complete) if operator == "All" else any(complete)):
            return [Done(True, f"JobSet {self.workload.name} completed: successPolicy {operator} of "
                               f"{', '.join(targets)} ({len(jobs)} Job(s)).")]
        return []

    def generations(self) -> dict[str, int]:
        return {n: s.generation for n, s in self.state.items()}


def summary_rows(controller: Controller, logs: dict[str, str], stopped: Iterable[str] = (),
                 late: dict[str, int] | None = None) -> list[str]:
    """One line per pod: its phase, exit codes, restarts and log path (`late`: pods that exited once the job was
    done, with their code)."""
    stopped, late = set(stopped), late or {}
    rows = []
    for name, state in controller.state.items():
        phase = "Stopped" if name in stopped else state.phase
        if name in late:
            phase = f"Exited {late[name]} as it ended"
        codes = ",".join(map(str, state.exit_codes)) or "-"
        rows.append(f"  {name:<32} {phase:<28} exit codes {codes:<14} restarts {state.restarts}  {logs.get(name, '')}")
    return rows

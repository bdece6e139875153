"""What KEP-5007's enhancement review asks (its Test Plan, Graduation Criteria and Production Readiness Review
questionnaire, in the KEP's own words, shortened), and the catalogue requirements whose outcomes answer each.

The review report (review.py) shows every question with those requirements' outcomes per release. A question no
requirement answers yet says why (`open`) and is listed as "not answered by any run yet", never left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.report.catalogue import CATALOGUE

TEST_PLAN, GRADUATION, PRR = "Test Plan", "Graduation Criteria (GA)", "Production Readiness Review"


@dataclass(frozen=True)
class Question:
    id: str
    part: str  # TEST_PLAN, GRADUATION or PRR
    section: str  # the KEP section it is asked in
    text: str  # the KEP's words, shortened
    answers: tuple[str, ...] = ()  # requirement ids whose outcomes answer it
    note: str = ""  # what the requirements show of it, where they answer part of it
    open: str = ""  # why no run answers it yet (no requirement)
    scale: bool = False  # answered by the figures of `make scale` given to the review (scale_evidence.py)


QUESTIONS: tuple[Question, ...] = (
    Question(
        "TP-1",
        TEST_PLAN,
        "Test Plan / e2e tests",
        "pod scheduling with binding conditions: the normal scenario",
        ("BASE-1", "SCH-1", "SCH-2", "SCH-3", "SCH-4", "SCH-7", "SCH-8"),
    ),
    Question(
        "TP-2",
        TEST_PLAN,
        "Test Plan / e2e tests",
        "pod scheduling with binding conditions: the timeout scenario",
        ("SCH-6", "SCH-9"),
        note="SCH-9 provokes binding timeouts with more pods than devices (the double allocation after a timeout)",
    ),
    Question(
        "TP-3",
        TEST_PLAN,
        "Test Plan / e2e tests",
        "pod scheduling with binding conditions: the failure scenario",
        ("SCH-5",),
    ),
    Question(
        "TP-4",
        TEST_PLAN,
        "Test Plan / e2e tests",
        "node nomination after rescheduling",
        ("SCH-3", "SCH-5"),
        note="SCH-3 asserts nominatedNodeName while the pod waits (1.35+), SCH-5 the rescheduling after a failure",
    ),
    Question(
        "TP-5",
        TEST_PLAN,
        "Test Plan / e2e tests",
        "a stress test with 1000 pods waiting in PreBind, measuring the scheduler's latency",
        ("SCALE-1", "SCH-10"),
        note="SCALE-1 runs --scale-pods pods (the reference runs 16 by default; the KEP says 1000); the latency is "
        "the SLI below (SCH-10) and SCALE-1's pods bound per second with and without binding conditions; `make scale` "
        "measures 1000 pods at 100 / 1000 / 5000 nodes (its figures below)",
    ),
    Question("GA-1", GRADUATION, "Graduation Criteria / GA", "the feature is enabled by default", ("BASE-2",)),
    Question(
        "GA-2",
        GRADUATION,
        "Graduation Criteria / GA",
        "no major bugs reported in the two consecutive releases before GA",
        ("SCH-1", "SCH-2", "SCH-3", "SCH-4", "SCH-5", "SCH-6", "SCH-7", "SCH-8", "SCH-9", "SCH-11"),
        note="the scheduler's requirements on every release (SCH-11: no component crashed under the run's DRA "
        "workload), and the known upstream defects listed per release below",
    ),
    Question(
        "GA-3",
        GRADUATION,
        "Graduation Criteria / GA",
        "scalability verified in clusters of 5000+ nodes",
        note="answered by `make scale` (not a suite run): the KEP's stress shape on 100 / 1000 / 5000 kwok nodes, "
        "the run-wide rules judged over it, kube-scheduler's double allocations counted apart",
        scale=True,
    ),
    Question(
        "GA-4",
        GRADUATION,
        "Graduation Criteria / GA",
        "the PRR approved and observability metrics in place",
        ("SCH-10",),
    ),
    Question(
        "PRR-1",
        PRR,
        "PRR / Feature Enablement and Rollback",
        "how can this feature be enabled? The gate DRADeviceBindingConditions on kube-apiserver and kube-scheduler",
        ("BASE-2",),
    ),
    Question(
        "PRR-2",
        PRR,
        "PRR / Feature Enablement and Rollback",
        "can the feature be disabled once it has been enabled? Yes. No existing claims or running pods will be "
        "affected",
        ("GATE-1", "GATE-2"),
        note="`dra-conformance lifecycle gates`: the gate switched off on kube-scheduler and kube-apiserver of a live "
        "cluster (the rollback order, then the other order); what a pod waiting in PreBind did is printed beside the "
        "KEP's sentence",
    ),
    Question(
        "PRR-3",
        PRR,
        "PRR / Feature Enablement and Rollback",
        "what happens if we re-enable the feature? It will begin working again",
        ("GATE-3",),
        note="`dra-conformance lifecycle gates`: new pods and pods left pending while the gate was off",
    ),
    Question(
        "PRR-4",
        PRR,
        "PRR / Rollout, Upgrade and Rollback Planning",
        "how can a rollout or rollback fail? The driver deployed, the controller not: pods wait in PreBind until the "
        "timeout (rollout order: apiserver, scheduler, driver, controller; rollback in reverse)",
        ("SCH-6", "GATE-1", "GATE-2"),
        note="SCH-6 is the failure example (no condition is ever written: the pod waits until the timeout); the "
        "lifecycle gates run stages the rollback order and the other order (what each does is printed beside the "
        "KEP's order)",
    ),
    Question(
        "PRR-5",
        PRR,
        "PRR / Rollout, Upgrade and Rollback Planning",
        "were upgrade and rollback tested? Was the upgrade->downgrade->upgrade path tested?",
        ("UPG-1", "UPG-2", "UPG-3"),
        note="`dra-conformance lifecycle upgrade`: OLD -> NEW -> OLD -> NEW on one etcd between adjacent releases, "
        "reported under NEW",
    ),
    Question(
        "PRR-6",
        PRR,
        "PRR / Version Skew Strategy",
        "older schedulers, or schedulers with the gate off, will not see the new fields and so proceed to binding",
        ("SKEW-1",),
        note="SKEW-1: kube-scheduler and kube-controller-manager one minor older (the upgrade run's first step, "
        "reported under NEW); a kube-scheduler with the gate off is measured by the gates run and printed beside "
        "the KEP's sentence",
    ),
    Question(
        "PRR-7",
        PRR,
        "PRR / Monitoring Requirements",
        "what metrics inform a rollback, what are the SLIs? scheduler_dra_bindingconditions_allocations_total{status} "
        "and the PreBind duration with status=success",
        ("SCH-10",),
        note="the binaries serve ..._wait_duration_seconds{profile,driver,status}, not the KEP's "
        "..._prebind_duration_seconds{status,requires_bindingconditions}",
    ),
)


def unknown_requirements() -> list[str]:
    """Requirement ids the table names that the catalogue lacks (a unit test keeps this empty)."""
    return [f"{q.id}: {r}" for q in QUESTIONS for r in q.answers if r not in CATALOGUE]

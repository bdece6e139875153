"""What the implementation promises: how long an attach, a detach and publishing take, whether it reports failures,
and the state its slices reach once it has published (the device read waits for it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from conformance.implementation.profile.base import _Strict

READ_SLACK_S = 60.0  # the device read's default wait past promises.publishSeconds for pools to be complete and rest


class Promises(_Strict):
    """Times the implementation promises; scenarios wait this long (plus the scheduler's poll) and no longer."""

    attach_s: Annotated[
        float,
        Field(
            alias="attachSeconds",
            gt=0,
            le=3600,
            description="an attach (for bindingModel node-local: readying the allocated device) completes within "
            "this; also sets the bindingTimeout of a cluster the suite starts",
        ),
    ] = 30.0
    detach_s: Annotated[
        float,
        Field(
            alias="detachSeconds",
            gt=0,
            le=3600,
            description="a released device is detached and offered again within this",
        ),
    ] = 60.0
    publish_s: Annotated[
        float,
        Field(
            alias="publishSeconds",
            gt=0,
            le=3600,
            description="within this many seconds of the implementation's readiness it has published what it owes: "
            "the `published` counts, every fabric pool reaching a Ready schedulable node, and a node without "
            "node-local devices reached by a fabric pool. The device read and every scenario that cannot start "
            "without it wait this long, then FAIL with the cause (pool, node selector, which label each node lacks)",
        ),
    ] = 60.0
    reports_failures: Annotated[
        bool,
        Field(
            alias="reportsFailures",
            description="false: the stack says it never sets its failure conditions (it publishes "
            "bindingFailureConditions but sets none, e.g. a controller that sets the binding conditions without "
            "checking anything). Judged, not skipped: the failure requirements (IMP-4, RDY-5) FAIL citing this "
            "declaration, without a fault injector; a claim of capabilities.attachFailureReporting contradicts it",
        ),
    ] = True


class Published(_Strict):
    """Readiness on what matters: the state the implementation's slices reach once it has published (besides its
    processes' readiness). The run's device read waits for it up to promises.publishSeconds (what the implementation
    owes); past that the run goes on with what is published, and the scenarios that need what is missing fail with
    the cause."""

    fabric_devices: Annotated[
        int,
        Field(
            alias="fabricDevices",
            ge=0,
            description="fabric devices (or counted entries) published in total; for bindingModel node-local the "
            "node-local devices with binding conditions",
        ),
    ] = 1
    per_model: Annotated[
        dict[str, int], Field(alias="perModel", description="entries per value of modelAttribute (counted entries)")
    ] = Field(default_factory=dict)
    settle_s: Annotated[
        float, Field(alias="settleSeconds", gt=0, le=600, description="the slices unchanged this long: published")
    ] = 2.0
    timeout_s: Annotated[
        float | None,
        Field(
            alias="timeoutSeconds",
            gt=0,
            le=3600,
            description="the longest the device read waits in all, counted like promises.publishSeconds and at least "
            "as long: past the promise it waits only for the slices to be complete and unchanged for settleSeconds, "
            "then reads them as they are (default: publishSeconds + 60)",
        ),
    ] = None

    @property
    def declared(self) -> bool:
        return "fabric_devices" in self.model_fields_set or bool(self.per_model)

"""Prometheus metrics of the controller (attach/detach latency, time to ready), served on /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.attach = Histogram(
            "reference_controller_attach_seconds",
            "Fabric attach calls, by outcome",
            ["outcome"],
            buckets=BUCKETS,
            registry=r,
        )
        self.detach = Histogram(
            "reference_controller_detach_seconds",
            "Fabric detach calls, by outcome",
            ["outcome"],
            buckets=BUCKETS,
            registry=r,
        )
        self.to_condition = Histogram(
            "reference_controller_allocation_to_condition_seconds",
            "From the claim's allocationTimestamp to the controller's condition write, by condition type",
            ["condition"],
            buckets=BUCKETS,
            registry=r,
        )
        self.condition_writes = Counter(
            "reference_controller_condition_writes_total",
            "Condition writes, by condition type and result",
            ["condition", "result"],
            registry=r,
        )
        self.reconciles = Counter("reference_controller_reconciles_total", "Reconcile passes", registry=r)
        self.devices = Gauge(
            "reference_controller_fabric_devices", "Fabric devices by fabric state", ["state"], registry=r
        )

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics; returns the bound port (port 0 picks a free one)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(server.server_port)

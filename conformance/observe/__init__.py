"""Watching what happens: published devices and leases, the run-wide invariants, histories of claims and pods."""

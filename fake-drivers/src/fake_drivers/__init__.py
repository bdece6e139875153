"""Reference implementation under test for the KEP-5007 conformance suite.

Components, one subpackage each:
- ``fake_drivers.fabric``: the fake fabric manager (HTTP service owning the truth of a PCIe/CXL fabric).
- ``fake_drivers.nodedriver``: the fake node-local vendor DRA driver (per-node slices that follow hot-plug).
- ``fake_drivers.controller``: the reference composable controller (fabric pools, attach before bind,
  binding conditions, failure, detach on release).
"""

__version__ = "0.1.0"

"""Reference implementation under test for the KEP-5007 conformance suite.

Components, one subpackage each:
- ``fake_drivers.fabric``: the fake fabric manager (HTTP service owning the truth of a PCIe/CXL fabric).
- the fake node-local vendor DRA driver and the reference composable controller are added later.
"""

__version__ = "0.1.0"

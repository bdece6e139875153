"""Fake node-local vendor DRA driver: per-node ResourceSlices with local and hot-plugged fabric devices."""

"""Bring-up of a cluster to test against (providers, binaries, releases and gates) and the Kubernetes client
plumbing every other layer uses.
"""

"""A dynamic client whose API discovery belongs to one cluster, read fresh from it and kept in memory only.

The kubernetes library caches discovery in a file under /tmp named after the server's URL and trusts it across
processes. Clusters brought up one after another on the same port (the suite's local clusters, a release matrix)
then read each other's API versions: a CI run asked a 1.37 cluster for the DeviceTaintRule version an earlier cluster
had served and got 404 for 30 s. A resource the stale file lacks is refreshed by the library; one it has wrongly is
not. Nothing is written, so nothing is left in /tmp either.
"""

from __future__ import annotations

import tempfile
import uuid

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer


class _InMemoryDiscoverer(LazyDiscoverer):
    def _write_cache(self) -> None:
        """Keep what was discovered in this object only."""


def fresh_dynamic(api: client.ApiClient) -> DynamicClient:
    """A DynamicClient discovering from `api`'s server on first use, sharing no cache with any other client."""
    # A file name nobody writes: the library reads a cache file only if it exists, so discovery starts empty.
    never_written = f"{tempfile.gettempdir()}/dra-conformance-discovery-{uuid.uuid4().hex}.json"
    return DynamicClient(api, cache_file=never_written, discoverer=_InMemoryDiscoverer)

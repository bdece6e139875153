"""API-* and SCH-*: the cluster and its release, checked with suite-owned drivers; no implementation needed."""

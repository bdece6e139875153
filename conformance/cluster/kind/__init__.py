"""The kind provider's pieces: cluster configuration (config.py), docker/kind checks and images (tools.py)."""

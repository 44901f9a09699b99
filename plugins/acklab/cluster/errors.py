"""Errors of the cluster seam."""


class ClusterStartError(RuntimeError):
    """A node failed to start, a backend is not ready, or the cluster did not become healthy."""

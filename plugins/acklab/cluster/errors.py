"""Errors of the cluster seam."""


class ClusterStartError(RuntimeError):
    """A node failed to start, a backend is not ready, or the cluster did not become healthy."""


class PortTakenError(ClusterStartError):
    """A node or the proxy could not bind a planned port: another process took it after planning."""

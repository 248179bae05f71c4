"""`kubectl phalanx`: the kubectl plugin that explains Phalanx's pending work (read-only)."""

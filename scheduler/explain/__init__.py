"""`kubectl phalanx explain|status`: why units are pending, read from a cluster's objects and the scheduler's own
code run in dry run on a copy of them (nothing is written)."""

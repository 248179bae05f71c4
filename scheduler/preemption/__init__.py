"""Workload-aware preemption (KEP-5710): the pure victim search and the actuator that applies it."""

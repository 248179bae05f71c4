"""Scheduling plugins, one rule per module (as kube-scheduler's plugins/ tree)."""

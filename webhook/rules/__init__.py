"""Admission rules, one module per kind; no Flask and no Kubernetes client, so `phalanx simulate` can use them."""

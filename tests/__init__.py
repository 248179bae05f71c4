"""Test suites; `tests.apiserver` is the loopback API server the Kubernetes-facing tests share."""

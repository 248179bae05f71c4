"""A stand-in kubelet that runs the chart's pods as local processes, for the end-to-end suite.

`../shared/kube` has no kubelet: its nodes are API objects, so nothing runs a pod. To install Phalanx as
a user does (`helm install`, then the chart's Deployments start the image), `python -m
tests.e2e.podrunner` registers one node and runs the pods bound to it: the project's image, read from its
Dockerfile (`image.py`), in a network namespace of each pod's own (`network.py`), with its volumes
(`volumes.py`) in a private mount namespace (`container.py`), probes (`probes.py`), restarts and graceful
deletion (`kubelet.py`). It needs root (namespaces, mounts, veth links), as a kubelet does.
"""

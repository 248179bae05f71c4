"""Back ends implementing the framework's `Cluster` Protocol: `memory` (simulator) and `kube`."""

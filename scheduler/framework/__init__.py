"""The scheduling framework: extension-point Protocols, Status, CycleState and the runner."""

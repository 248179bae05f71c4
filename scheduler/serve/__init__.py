"""The explain API (`explain.phalanx.dev/v1alpha1`) the scheduler serves to kube-apiserver's front proxy."""

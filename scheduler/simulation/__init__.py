"""`phalanx simulate`: scenario loading, the virtual-clock driver and its reports."""

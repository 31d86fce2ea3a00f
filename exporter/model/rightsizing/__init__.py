"""Right-sizing arithmetic: the utilisation histogram evidence is kept in, the GPU table, and the rules that turn
a workload's evidence into a recommendation. Pure: no I/O imports."""

"""The simulated GPU cluster: real protocol peers (DCGM Exporter HTTP, kubelet pod-resources gRPC,
Kubernetes API list/watch) driven by a scenario file, on a real or a virtual clock."""

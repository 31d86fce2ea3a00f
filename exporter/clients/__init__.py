"""Clients of the systems we talk to: DCGM Exporter (HTTP), kubelet pod-resources (gRPC), the Kubernetes API.

Only this layer touches the wire; it turns transport failures into the typed errors of ``errors``.
"""

"""Who holds which device: the kubelet's assignments joined to the exporters' devices, with each share.

This package owns turning pod-resources answers into holder assignments with their fractions: the device
plugin's whole GPUs and replicas (``attribution``, ``assignment``), MIG instances, time-slicing and MPS,
DRA claims (``dra``, ``dra_attribution``), HAMi's vGPU annotations (``hami``), AMD's PCI addresses and
compute partitions (``amd``), Gaudi serials (``gaudi``), the node's pod context these joins read
(``sharing``), and how a shared device's busy time is split among its holders by what each measurably used
(``measured``). Import rule: ``exporter.model``, ``exporters`` (the device records) and this package; never
the agent's top-level modules, which wire it.
"""

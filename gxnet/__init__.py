"""GXNET: the decode-step workload emulator (paper 003, Section 4 and Appendix B).

Flow: model spec (``models``) -> model graph with SymPy shapes (``graph``) -> passes (decode,
precision, sharding + collective insertion, fusion, resources, roofline; ``passes``) ->
per-deployment substitution and lowering (``plan``) -> event-driven execution against a network
model (``executor``). ``demand`` gives the deployment-time collective demand (Table 1) from the
same sharded graph; ``memory`` the per-rank footprint; ``splits`` the Helix search space (B.6).

Imports ``fabrics`` and ``collectives`` only (never ``pipelines``, hydra, omegaconf, torch).
"""

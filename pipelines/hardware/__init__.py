"""Real-hardware runners (issue #8): kernel calibration with torch, AlltoAllv replay with
torch.distributed, and host topology discovery.

Modules that import torch (``kernels``, ``replay_worker``) are only imported where they run;
the plan-building modules (``replay_plan``, ``calibration_shapes``) are pure and unit-tested
without torch.
"""

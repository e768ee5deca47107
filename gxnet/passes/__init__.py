"""Graph-to-graph passes of GXNET (paper 003, B.1) and the pass manager that orders them."""

from gxnet.passes.manager import Pass, PassError, PassManager, standard_pipeline

__all__ = ["Pass", "PassError", "PassManager", "standard_pipeline"]

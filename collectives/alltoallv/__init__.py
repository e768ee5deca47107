"""AlltoAllv scheduling on PCIe GPU systems (paper 000): VarioPath, baselines, ablations, MILP optimum.

Imports nothing from ``fabrics``: ``fabrics.pcie`` builds the ``ChannelTopology`` consumed here.
"""

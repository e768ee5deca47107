"""What carries a collective: physical fabrics, routing, network models, OCS planner, power.

Imports ``collectives`` only (never ``gxnet`` or ``pipelines``); see DESIGN.md.
"""

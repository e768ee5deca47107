"""What a collective *is*: logical topologies, schedules, closed forms, verifier, AlltoAllv schedulers.

Lowest room of the house (see DESIGN.md): imports nothing from gxnet, fabrics or pipelines.
"""

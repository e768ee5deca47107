"""The physical side of the scale-up fabrics (paper 003, Appendix C): worker allocation, OCS and
hybrid circuit configuration, routing over the devices and links, and the analytical phase cost.

Imports run one way: ``colouring`` ← ``circuit_sizing`` ← ``allocation`` ← ``ocs_configuration``
← ``paths`` → ``phase_cost``.
"""

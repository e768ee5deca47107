"""How the VarioPath presets (conf/scheduler/variopath*.yaml) were chosen: tuning and held-apart seeds.

Presets are chosen on the tuning seeds and reported on the test seeds, which no choice looked at
(benchmarks/alltoallv_planning.py --quality prints both; benchmarks/variopath_presets.py searches
candidate presets on the tuning seeds; tests/validation/test_variopath_heldout.py checks the test
split). Instances: one and two R5080-BF3 nodes (8 and 16 GPUs), dense Zipf
demands (collectives.alltoallv.workloads.zipf) of 32 MiB per source at every skew, against the
certified MILP optimum of the channel model (milp.py), both timed by the flow-level evaluator.
Seeds 0-4 are the ones the other VarioPath tests use; neither split overlaps them.
"""

NODES = (1, 2)
SKEWS = (0.6, 0.8, 1.0, 1.2)
BYTES_PER_RANK = 32 * 2**20
TUNING_SEEDS = (100, 101, 102, 103, 104, 105)
TEST_SEEDS = (200, 201, 202, 203, 204, 205)

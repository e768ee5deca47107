"""NCCL-like collective model (``network=nccl``) for GPU systems: NVLink/NVSwitch domains and
multi-node clusters of them (``fabrics.spec.ClusterSpec`` of the gpu family).

Modules (one job each):

- ``params``: the frozen parameter data -- ``NcclSpec`` (forced algorithm/protocol + generations)
  and ``Generation`` (channels, protocol shapes, and the three tables NCCL's tuner has: base
  latency [algorithm][protocol], hop latency [transport][algorithm][protocol], efficiency
  [transport][algorithm][protocol]). Transports are rows: ``nvlink``, ``net`` (and ``pci``).
- ``cost``: the cost functions, one per algorithm, all with the same signature
  ``f(gen, links, place, collective, protocol, size_bytes) -> Estimate`` (``ring``, ``tree``,
  ``nvls``, ``nvls_tree``), plus ``p2p(gen, links, protocol, intra_bytes, inter_bytes)`` for
  all-to-all / AlltoAllv / send-recv, and ``channels_used``. ``Links`` carries the rates one group
  sees (``intra_transport`` names the hop-latency/efficiency row of the intra-node bus: "nvlink";
  a PCIe server passes "pci" and its bus rate), ``Placement`` the ranks / nodes / ranks per node.
  ``Estimate`` = (algorithm, protocol, latency_s, bandwidth_s); ``time_s`` is their sum.
- ``tuner``: the candidates NCCL would enable, the least-time choice (``choose``), forced choices
  and the one-line refusals (``check_forced``).
- ``model``: ``NcclNetwork`` (the NetworkModel protocol: prepare / register / advance / report),
  ``GpuSystem`` (the adapter from a ``ClusterSpec`` of the gpu family: GPUs per node, intra-node
  transport and rate, NIC bandwidth, NVLS; ``links(group, active)`` gives a group's ``Links`` and
  ``Placement``) and ``build_nccl`` (the registry's builder). Concurrent calls are priced independently, as in
  the analytical model; the groups of one call share their nodes' NICs.

- ``pcie``: ``PcieNccl``, the same tables on PCIe servers (``fabric=pcie``): the transport of a
  pair from NCCL's path type and ``p2p_level`` (``pci`` P2P under a switch, ``pci_rc`` P2P through
  the root complex, ``shm`` / ``shm_sys`` host memory, ``net``), the bandwidth from the flow
  evaluator with each lane at its transport's efficiency, NCCL's latency on top.

To add a bus (e.g. PCIe: P2P through the root complex, SHM through host memory), add its rows
under ``hop_latency.<transport>`` and ``efficiency.<transport>`` in conf/network/nccl.yaml and
give ``NcclNetwork`` a system adapter like ``GpuSystem`` whose ``intra_transport`` is that row and
whose ``intra_Bps`` is the bus rate a GPU sees; the cost functions and the tuner need no change. Parameters and fit: docs/nccl.md.
"""

from fabrics.network.nccl.cost import Estimate, Links, Placement
from fabrics.network.nccl.params import ALGORITHMS, PROTOCOLS, Generation, NcclSpec, ProtocolShape

__all__ = ["ALGORITHMS", "PROTOCOLS", "Estimate", "Generation", "Links", "NcclSpec", "Placement", "ProtocolShape"]

"""fabrics/pcie/topology_import.py: nvidia-smi topo -m text and NCCL topology XML -> platform."""

import pytest

from collectives.alltoallv.catalog import build_catalog
from collectives.errors import SpecError
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster
from fabrics.pcie.topology_import import platform_from_nccl_xml, platform_from_nvidia_smi

# A 2-socket, 4-GPU, 2-NIC server: GPU0/1 + NIC0 under one switch on socket 0, GPU2/3 + NIC1 on socket 1.
SMI = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tPIX\tSYS\tSYS\tPIX\tSYS\t0-31\t0\t\tN/A
GPU1\tPIX\t X \tSYS\tSYS\tPIX\tSYS\t0-31\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tPIX\tSYS\tPIX\t32-63\t1\t\tN/A
GPU3\tSYS\tSYS\tPIX\t X \tSYS\tPIX\t32-63\t1\t\tN/A
NIC0\tPIX\tPIX\tSYS\tSYS\t X \tSYS
NIC1\tSYS\tSYS\tPIX\tPIX\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  PIX  = Connection traversing at most a single PCIe bridge

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""

XML = """<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:15:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:16:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="89" rank="0" gdr="1"/>
      </pci>
      <pci busid="0000:17:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="89" rank="1" gdr="1"/>
      </pci>
      <pci busid="0000:18:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x1" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
    <pci busid="0000:35:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:36:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="2" sm="89" rank="2" gdr="1"/>
      </pci>
      <pci busid="0000:37:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="3" sm="89" rank="3" gdr="1"/>
      </pci>
    </pci>
  </cpu>
</system>
"""


def test_nvidia_smi_import_reconstructs_switches_sockets_and_nics():
    p = platform_from_nvidia_smi(SMI, name="smi", pcie_rate=64e9, nic_rate=50e9)
    assert p["gpus_per_node"] == 4
    assert sorted(map(sorted, p["gpus"].values())) == [[0, 1], [2, 3]]
    assert sum(1 for k in p["vertices"].values() if k == "cpu") == 2
    t = channel_topology(pcie_cluster(p, 1))
    assert {q.kind for q in t.options(0, 1)} == {"PIX"}
    assert "SYS" in {q.kind for q in t.options(0, 2)} and "NIC" in {q.kind for q in t.options(0, 2)}
    assert t.groups == ((0, 1), (2, 3))
    assert build_catalog(t).n_shapes >= 2  # usable by VarioPath


def test_nccl_xml_import_derives_rates_from_link_speed_and_width():
    p = platform_from_nccl_xml(XML, name="xml")
    assert p["gpus_per_node"] == 4 and sorted(map(sorted, p["gpus"].values())) == [[0, 1], [2, 3]]
    assert p["nic_rate"] == pytest.approx(400e9 / 8)
    cluster = pcie_cluster(p, 2)
    cap = cluster.capacities()
    gen5_x16 = 32e9 * 128 / 130 / 8 * 16
    gen4_x16 = 16e9 * 128 / 130 / 8 * 16
    assert cap["n0.g0>sw0"] == pytest.approx(gen5_x16) and cap["n0.g2>sw1"] == pytest.approx(gen4_x16)
    t = channel_topology(cluster)
    assert {q.kind for q in t.options(0, 1)} == {"PIX"}
    assert "PHB" in {q.kind for q in t.options(0, 2)}  # both switches under socket 0
    assert all(q.kind == "NIC" for q in t.options(0, 4))  # across nodes


@pytest.mark.parametrize("bad", ["", "hello world", "\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X\n"])
def test_bad_nvidia_smi_text_is_a_spec_error(bad):
    with pytest.raises(SpecError):
        platform_from_nvidia_smi(bad)


def test_bad_xml_is_a_spec_error():
    with pytest.raises(SpecError):
        platform_from_nccl_xml("<system><cpu></system>")
    with pytest.raises(SpecError, match="no <gpu>"):
        platform_from_nccl_xml("<system><cpu numaid='0'/></system>")


def test_files_written_by_the_test_are_read_in_either_format(tmp_path):
    from pipelines.hardware.topology import platform_from_file

    (tmp_path / "topo.txt").write_text(SMI)
    (tmp_path / "topo.xml").write_text(XML)
    smi = platform_from_file(tmp_path / "topo.txt", pcie_rate=64e9, nic_rate=50e9)
    xml = platform_from_file(tmp_path / "topo.xml")
    assert smi["name"] == "topo" and smi["gpus_per_node"] == 4 and xml["gpus_per_node"] == 4
    assert "links" in xml and xml["nics"]
    with pytest.raises(SpecError, match="does not exist"):
        platform_from_file(tmp_path / "missing.txt")

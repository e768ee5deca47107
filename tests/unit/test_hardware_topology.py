"""Host topology discovery glue (pipelines.hardware.topology): tool output -> platform YAML that
the PCIe model (and so pipelines.alltoallv platform=<name>) accepts."""

import yaml

from collectives.errors import SpecError
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster
from pipelines.hardware import topology

# 8 GPUs: pairs under four switches, two switches per upper switch, one NIC per upper switch, one socket.
SMI = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\n"
ROWS = {
    "GPU0": "X PIX PXB PXB PHB PHB PHB PHB PXB PHB", "GPU1": "PIX X PXB PXB PHB PHB PHB PHB PXB PHB",
    "GPU2": "PXB PXB X PIX PHB PHB PHB PHB PXB PHB", "GPU3": "PXB PXB PIX X PHB PHB PHB PHB PXB PHB",
    "GPU4": "PHB PHB PHB PHB X PIX PXB PXB PHB PXB", "GPU5": "PHB PHB PHB PHB PIX X PXB PXB PHB PXB",
    "GPU6": "PHB PHB PHB PHB PXB PXB X PIX PHB PXB", "GPU7": "PHB PHB PHB PHB PXB PXB PIX X PHB PXB",
    "NIC0": "PXB PXB PXB PXB PHB PHB PHB PHB X PHB", "NIC1": "PHB PHB PHB PHB PXB PXB PXB PXB PHB X",
}
SMI += "".join(f"{k}\t" + "\t".join(v.split()) + "\t0-63\n" for k, v in ROWS.items())


def test_nvidia_smi_file_to_platform_yaml_the_model_accepts(tmp_path, capsys):
    src = tmp_path / "topo.txt"
    src.write_text(SMI)
    out = tmp_path / "conf" / "box.yaml"
    assert topology.main(["--nvidia-smi-file", str(src), "--name", "box", "--out", str(out),
                          "--pcie-rate", "64GB/s", "--nic-rate", "50GB/s"]) == 0
    assert "8 GPUs, 2 NICs" in capsys.readouterr().out
    text = out.read_text()
    assert text.startswith("# Discovered by pipelines.hardware.topology from nvidia-smi")
    plat = yaml.safe_load(text)
    assert plat["name"] == "box" and plat["gpus_per_node"] == 8
    assert sorted(sorted(g) for g in plat["gpus"].values()) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    cluster = pcie_cluster(plat, 2)
    assert cluster.n_ranks == 16
    topo = channel_topology(cluster)
    assert topo.nearest(0, 1).kind == "PIX" and topo.nearest(0, 2).kind == "PXB"
    assert {p.kind for p in topo.options(0, 8)} == {"NIC"}


def test_no_source_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    def no_nccl(*a, **k):
        raise SpecError("NCCL did not dump its topology (no GPU)")

    monkeypatch.setattr(topology, "nccl_topology_xml", no_nccl)
    monkeypatch.setattr(topology.shutil, "which", lambda name: None)
    assert topology.main(["--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no GPU topology on this host") and "nvidia-smi is not on PATH" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "x.yaml").exists()
    assert topology.main(["--source", "ib"]) == 2

"""Host topology discovery -> a ``conf/platform`` YAML the PCIe model and the scheduler use.

So a testbed can be modelled before it is replayed on (issue #8):

    python -m pipelines.hardware.topology --name mybox --out conf/platform/mybox.yaml
    python -m pipelines.alltoallv platform=mybox ...        # plan + predict on the model of this host
    python -m pipelines.replay run_id=<that run>            # replay it here, measured beside predicted

Sources (``--source``): ``nccl`` — NCCL's own topology dump (``NCCL_TOPO_DUMP_FILE``, written when
a one-rank NCCL communicator starts here; or ``--nccl-xml FILE`` from elsewhere): the real PCIe
tree with link widths and speeds; ``nvidia-smi`` — ``nvidia-smi topo -m`` (or
``--nvidia-smi-file FILE``): the connection matrix, without rates (``--pcie-rate``/``--nic-rate``);
``auto`` — NCCL when it can be had, else nvidia-smi. Parsing is ``fabrics.pcie.topology_import``;
this module only runs the tools and writes the file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from datetime import datetime, timezone
from pathlib import Path

from collectives.errors import SpecError

def platform_from_file(path, **kwargs) -> dict:
    """Read either format from a file: XML (an NCCL dump) if it starts with '<', else nvidia-smi text."""
    from fabrics.pcie.topology_import import platform_from_nccl_xml, platform_from_nvidia_smi

    text = read_text(str(path), "topology file")
    name = kwargs.pop("name", Path(path).stem)
    if text.lstrip().startswith("<"):
        return platform_from_nccl_xml(text, name=name, **kwargs)
    return platform_from_nvidia_smi(text, name=name, **kwargs)


_DUMP_SNIPPET = textwrap.dedent("""
    import os, socket, torch, torch.distributed as dist
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    x = torch.ones(1, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.destroy_process_group()
""")


def nvidia_smi_text(timeout_s: float = 30.0) -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise SpecError("nvidia-smi is not on PATH; pass --nvidia-smi-file with `nvidia-smi topo -m` output from the server")
    out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise SpecError(f"`nvidia-smi topo -m` failed (exit {out.returncode}): {' '.join(out.stderr.split())[:200]}")
    return out.stdout


def nccl_topology_xml(timeout_s: float = 120.0) -> str:
    """Start a one-rank NCCL communicator in a child process with ``NCCL_TOPO_DUMP_FILE`` set."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nccl_topo.xml"
        env = dict(os.environ, NCCL_TOPO_DUMP_FILE=str(path))
        out = subprocess.run([sys.executable, "-c", _DUMP_SNIPPET], env=env, capture_output=True, text=True,
                             timeout=timeout_s)
        if out.returncode != 0 or not path.is_file():
            tail = " ".join(out.stderr.split())[-200:]
            raise SpecError(f"NCCL did not dump its topology (exit {out.returncode}): {tail}; use --source nvidia-smi")
        return path.read_text()


def read_text(path: str, what: str) -> str:
    """A topology file's text; missing, a folder or not UTF-8 text is one line naming the option."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what} {path!r} does not exist or is not a file")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} {path!r} cannot be read as text ({type(exc).__name__})") from None


def discover(source: str = "auto", *, name: str = "host", nccl_xml: str | None = None,
             nvidia_smi_file: str | None = None, pcie_rate: float = 32e9, nic_rate: float = 25e9) -> tuple[dict, str]:
    """-> (platform dict, description of the source)."""
    from fabrics.pcie.topology_import import platform_from_nccl_xml, platform_from_nvidia_smi

    if source not in ("auto", "nccl", "nvidia-smi"):
        raise SpecError(f"--source {source!r} is unknown; use auto, nccl or nvidia-smi")
    if nccl_xml:
        return platform_from_nccl_xml(read_text(nccl_xml, "--nccl-xml"), name=name, default_rate=pcie_rate), f"NCCL XML {nccl_xml}"
    if nvidia_smi_file:
        return (platform_from_nvidia_smi(read_text(nvidia_smi_file, "--nvidia-smi-file"), name=name, pcie_rate=pcie_rate,
                                         nic_rate=nic_rate), f"nvidia-smi topo -m text {nvidia_smi_file}")
    errors = []
    if source in ("auto", "nccl"):
        try:
            return platform_from_nccl_xml(nccl_topology_xml(), name=name, default_rate=pcie_rate), "NCCL topology dump"
        except (SpecError, OSError, subprocess.TimeoutExpired) as exc:
            if source == "nccl":
                raise
            errors.append(str(exc))
    try:
        return (platform_from_nvidia_smi(nvidia_smi_text(), name=name, pcie_rate=pcie_rate, nic_rate=nic_rate),
                "nvidia-smi topo -m")
    except (SpecError, OSError, subprocess.TimeoutExpired) as exc:
        errors.append(str(exc))
    raise SpecError(f"no GPU topology on this host ({'; '.join(errors)})")


def platform_yaml(platform: dict, source: str) -> str:
    import yaml

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"# Discovered by pipelines.hardware.topology from {source} on {os.uname().nodename}, {stamp}.\n"
            f"# Rates are B/s; check them (nvidia-smi gives no bandwidths) and the NIC placement before planning.\n")
    return head + yaml.safe_dump(platform, sort_keys=False)


def main(argv: list[str] | None = None) -> int:
    from pipelines.units import parse_rate

    ap = argparse.ArgumentParser(prog="python -m pipelines.hardware.topology", description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default="auto", help="auto | nccl | nvidia-smi")
    ap.add_argument("--name", default="host", help="platform name (conf/platform/<name>.yaml)")
    ap.add_argument("--out", default=None, help="YAML to write (default: ./<name>.yaml)")
    ap.add_argument("--nccl-xml", default=None, help="an NCCL_TOPO_DUMP_FILE from the server")
    ap.add_argument("--nvidia-smi-file", default=None, help="saved `nvidia-smi topo -m` output")
    ap.add_argument("--pcie-rate", default="32GB/s", help="per-direction PCIe rate when the source has none")
    ap.add_argument("--nic-rate", default="25GB/s", help="NIC port rate when the source has none")
    a = ap.parse_args(argv)
    try:
        platform, source = discover(a.source, name=a.name, nccl_xml=a.nccl_xml, nvidia_smi_file=a.nvidia_smi_file,
                                    pcie_rate=parse_rate(a.pcie_rate, "--pcie-rate"),
                                    nic_rate=parse_rate(a.nic_rate, "--nic-rate"))
        from pipelines.network import pcie_cluster

        pcie_cluster(platform, 1)  # the file must be a valid platform model
    except (SpecError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(a.out or f"{a.name}.yaml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(platform_yaml(platform, source))
    print(f"wrote {out}: {platform['gpus_per_node']} GPUs, {len(platform.get('nics', {}))} NICs ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Import a real server's PCIe topology into a platform dict (the ``conf/platform`` format).

Two sources (paper 000, Section 5: "we reconstruct the topology from the GPU/HCA PCIe hierarchy
and socket affinity"):

- ``nvidia-smi topo -m`` text: the GPU/NIC connection matrix (X, PIX, PXB, PHB, NODE, SYS).
  It has no bandwidths, so rates come from the arguments. GPUs joined by PIX share a switch;
  switches joined by PXB hang off a common upper switch; PHB/NODE-related devices share a CPU,
  SYS-related ones sit on different CPUs joined by the inter-socket link. A NIC goes to the
  switch of a GPU it is PIX to, else to the upper switch it is PXB to, else onto the CPU.
- an NCCL topology XML dump (``NCCL_TOPO_DUMP_FILE``): the real PCIe tree (``<cpu>`` ->
  ``<pci>`` bridges -> ``<gpu>`` / ``<nic><net>``) with link speed and width, so link rates are
  derived (per-lane GT/s with 128b/130b coding for Gen3+); NIC rates come from ``net speed``.

Both return plain platform dicts that ``pipelines.network.pcie_server_spec`` accepts (rates in B/s).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from collectives.errors import SpecError

_KINDS = {"X", "PIX", "PXB", "PHB", "NODE", "SYS"}


def _components(items: list[str], joined) -> list[list[str]]:
    parent = {x: x for x in items}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in items:
        for b in items:
            if a < b and joined(a, b):
                parent[find(a)] = find(b)
    comps: dict[str, list[str]] = {}
    for x in items:
        comps.setdefault(find(x), []).append(x)
    return sorted(comps.values(), key=lambda c: items.index(c[0]))


def platform_from_nvidia_smi(text: str, *, name: str = "imported", pcie_rate: float = 32e9,
                             nic_rate: float = 25e9, socket_rate: float = 64e9) -> dict:
    """Parse ``nvidia-smi topo -m`` output into a platform dict."""
    lines = [l.rstrip() for l in text.splitlines() if l.strip()]
    header = None
    rows: dict[str, list[str]] = {}
    for line in lines:
        cells = line.split()
        if header is None:
            if cells and cells[0].startswith("GPU0"):
                header = [c for c in cells if re.fullmatch(r"(GPU|NIC)\d+", c)]
            continue
        if cells and re.fullmatch(r"(GPU|NIC)\d+", cells[0]) and len(cells) > len(header):
            rows[cells[0]] = cells[1:1 + len(header)]
    if not header or not rows:
        raise SpecError("nvidia-smi topology text has no 'GPU0 ...' header row; pass the output of `nvidia-smi topo -m`")
    for dev, vals in rows.items():
        bad = [v for v in vals if v not in _KINDS and not v.startswith("NV")]
        if bad:
            raise SpecError(f"nvidia-smi topology row {dev} has unknown entries {bad}; expected X, PIX, PXB, PHB, NODE, SYS")
    missing = [d for d in header if d not in rows]
    if missing:  # a truncated or edited table: never model fewer devices than the header names
        raise SpecError(f"nvidia-smi topology text names {missing[0]} in its header but has no full row for it; "
                        f"pass the complete output of `nvidia-smi topo -m`")
    devs = [d for d in header if d in rows]
    rel = {(a, b): rows[a][header.index(b)] for a in devs for b in devs}
    gpus = [d for d in devs if d.startswith("GPU")]
    nics = [d for d in devs if d.startswith("NIC")]
    if not gpus:
        raise SpecError("nvidia-smi topology lists no GPUs")
    switches = _components(gpus, lambda a, b: rel[(a, b)] == "PIX")
    sw_of = {g: f"sw{k}" for k, comp in enumerate(switches) for g in comp}
    uppers = _components([f"sw{k}" for k in range(len(switches))],
                         lambda a, b: rel[(switches[int(a[2:])][0], switches[int(b[2:])][0])] == "PXB")
    cpus = _components(gpus, lambda a, b: rel[(a, b)] in ("PIX", "PXB", "PHB", "NODE"))
    cpu_of = {g: f"cpu{k}" for k, comp in enumerate(cpus) for g in comp}
    vertices = {f"cpu{k}": "cpu" for k in range(len(cpus))}
    links = []
    up_of = {}
    for u, comp in enumerate(uppers):
        if len(comp) > 1:
            vertices[f"up{u}"] = "switch"
            links.append([f"up{u}", cpu_of[switches[int(comp[0][2:])][0]], pcie_rate])
        for sw in comp:
            vertices[sw] = "switch"
            head = switches[int(sw[2:])][0]
            links.append([sw, f"up{u}" if len(comp) > 1 else cpu_of[head], pcie_rate])
            up_of[sw] = f"up{u}" if len(comp) > 1 else None
    for k in range(1, len(cpus)):
        links.append(["cpu0", f"cpu{k}", socket_rate])
    nic_at = {}
    for n in nics:
        pix = [g for g in gpus if rel[(n, g)] == "PIX"]
        pxb = [g for g in gpus if rel[(n, g)] == "PXB"]
        near = [g for g in gpus if rel[(n, g)] in ("PHB", "NODE")]
        if pix:
            nic_at[n.lower()] = sw_of[pix[0]]
        elif pxb and up_of.get(sw_of[pxb[0]]):
            nic_at[n.lower()] = up_of[sw_of[pxb[0]]]
        elif near or pxb:
            nic_at[n.lower()] = cpu_of[(near or pxb)[0]]
        else:
            nic_at[n.lower()] = "cpu0" if len(cpus) == 1 else cpu_of[gpus[0]]
    gpu_lists: dict[str, list[int]] = {}
    for g in gpus:
        gpu_lists.setdefault(sw_of[g], []).append(int(g[3:]))
    return {"name": name, "gpus_per_node": len(gpus), "pcie_rate": pcie_rate, "nic_rate": nic_rate,
            "vertices": vertices, "gpus": gpu_lists, "nics": nic_at, "links": links}


_GT_PER_LANE_BPS = {2.5: 2.5e9 * 8 / 10 / 8, 5.0: 5e9 * 8 / 10 / 8, 8.0: 8e9 * 128 / 130 / 8,
                    16.0: 16e9 * 128 / 130 / 8, 32.0: 32e9 * 128 / 130 / 8, 64.0: 64e9 * 242 / 256 / 8}


def _number(node: ET.Element, attr: str, default: float, kind: type = float) -> float:
    """A numeric attribute of an XML element; a value that is not one is a one-line SpecError."""
    raw = node.get(attr)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < 0:
        rule = "a whole number >= 0" if kind is int else "a finite number >= 0"
        raise SpecError(f"NCCL topology XML: <{node.tag} {attr}={raw!r}> must be {rule}")
    return value


def _link_rate(node: ET.Element, default: float) -> float:
    speed = node.get("link_speed", "")
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s", speed)
    width = _number(node, "link_width", 0, int)
    if not m or not width:
        return default
    per_lane = _GT_PER_LANE_BPS.get(float(m.group(1)), float(m.group(1)) * 1e9 * 128 / 130 / 8)
    return per_lane * width


def platform_from_nccl_xml(text: str, *, name: str = "imported", default_rate: float = 32e9,
                           socket_rate: float = 64e9) -> dict:
    """Parse an NCCL topology dump (``NCCL_TOPO_DUMP_FILE``) into a platform dict."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SpecError(f"NCCL topology XML does not parse: {exc}") from None
    if root.tag != "system":
        raise SpecError(f"NCCL topology XML root is <{root.tag}>; expected <system>")
    vertices: dict[str, str] = {}
    links: list[list] = []
    gpus: list[tuple[int, str, float]] = []  # (dev, vertex, attachment rate)
    nics: dict[str, tuple[str, float, float]] = {}  # name -> (vertex, link rate, port rate)
    counter = {"rp": 0}

    def walk(node: ET.Element, parent: str, parent_is_cpu: bool) -> None:
        for child in node:
            if child.tag != "pci":
                continue
            rate = _link_rate(child, default_rate)
            gpu = child.find("gpu")
            nic = child.find("nic")
            if gpu is not None:
                at = parent
                if parent_is_cpu:  # a GPU on a root port: its own port vertex, so two root ports are PHB apart
                    at = f"rp{counter['rp']}"
                    counter["rp"] += 1
                    vertices[at] = "switch"
                    links.append([at, parent, rate])
                gpus.append((_number(gpu, "dev", len(gpus), int), at, rate))
            elif nic is not None:
                for net in nic.findall("net"):
                    speed_mbps = _number(net, "speed", 0.0)
                    port = speed_mbps * 1e6 / 8 if speed_mbps > 0 else rate
                    nics[net.get("name", f"nic{len(nics)}").replace(":", "_")] = (parent, rate, port)
            else:
                vid = f"sw{sum(1 for v in vertices if v.startswith('sw'))}"
                vertices[vid] = "switch"
                links.append([vid, parent, rate])
                walk(child, vid, False)

    cpu_names = []
    for cpu in root.findall("cpu"):
        cid = f"cpu{cpu.get('numaid', len(cpu_names))}"
        vertices[cid] = "cpu"
        cpu_names.append(cid)
        walk(cpu, cid, True)
    if not gpus:
        raise SpecError("NCCL topology XML lists no <gpu>; dump it on the GPU server with NCCL_TOPO_DUMP_FILE")
    for c in cpu_names[1:]:
        links.append([cpu_names[0], c, socket_rate])
    devs = [dev for dev, _, _ in gpus]
    if len(set(devs)) != len(devs):
        dup = next(d for d in devs if devs.count(d) > 1)
        raise SpecError(f"NCCL topology XML: two <gpu> elements have dev={dup}; each GPU needs its own dev number")
    gpus.sort()
    order = {dev: k for k, (dev, _, _) in enumerate(gpus)}
    gpu_lists: dict[str, list[int]] = {}
    for dev, at, _ in gpus:
        gpu_lists.setdefault(at, []).append(order[dev])
    port_rates = {p for _, _, p in nics.values()}
    return {"name": name, "gpus_per_node": len(gpus), "pcie_rate": max(r for _, _, r in gpus),
            "gpu_link_rate": [r for _, _, r in gpus],
            "nic_rate": min(port_rates) if port_rates else default_rate, "vertices": vertices,
            "gpus": gpu_lists, "nics": {n: {"at": v, "link_rate": r} for n, (v, r, _) in nics.items()},
            "links": links}

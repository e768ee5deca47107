"""``python -m pipelines.fit_nccl``: fit the NCCL-like model to its calibration set and write the
fitted values into conf/network/nccl.yaml.

The calibration set is conf/measurements/nccl_allreduce.yaml (sections 1-2 of
../shared/reference/gpu-measurements.md) for the GPU generations, and conf/measurements/nccl_pcie.yaml
(section 3) for the ``pcie_server`` generation (``pipelines.fit_nccl_pcie``). For each system generation the fit minimises the sum of
squared log ratios predicted/measured time over that generation's rows (bounded least squares,
scipy ``trf``; parameters bounded to physical ranges), with the model's own tuner choosing the
algorithm/protocol on "auto" rows, exactly as a user's run would. The ring channel count is an
integer: the fit runs once per candidate of ``CHANNEL_GRID`` and keeps the best. Values marked
``# fitted`` / ``# tied`` in the YAML are rewritten in place (comments and every other value kept).

    python -m pipelines.fit_nccl                 # fit, write conf/network/nccl.yaml, print residuals
    python -m pipelines.fit_nccl --check         # fit, exit 1 if the committed values differ
    python -m pipelines.fit_nccl --plots docs/img --table   # figures and the residual table (docs/nccl.md)
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from collectives.errors import SpecError
from pipelines.nccl_fit_values import bus_factor, format_value, value_at, with_values
from pipelines.nccl_params import PARAMS_FILE, default_mapping, nccl_spec
from pipelines.units import parse_bytes

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "conf" / "measurements" / "nccl_allreduce.yaml"
ACCELERATORS = ROOT / "conf" / "accelerator"
CHANNEL_GRID = (8, 16, 24, 32)

# (table, transport, row, protocol), start value (NCCL's default constant), bounds
FITTED = (
    (("hop_latency", "nvlink", "ring", "ll"), 0.6e-6, (0.05e-6, 3e-6)),   # per ring step, LL
    (("efficiency", "nvlink", "ring", "ll"), 0.5, (0.05, 0.5)),          # LL: 8-byte lines carry 4 data bytes
    (("efficiency", "nvlink", "ring", "simple"), 0.8, (0.3, 1.0)),
    (("hop_latency", "nvlink", "nvls", "simple"), 25e-6, (1e-6, 100e-6)),
    (("efficiency", "nvlink", "nvls", "simple"), 0.7, (0.3, 1.0)),
    (("nvls_overlap_chunks",), 1.0, (1.0, 16.0)),  # NCCL keeps NCCL_STEPS = 8 chunk slots per channel
    (("nvls_channel_Bps",), 10e9, (1e9, 200e9)),   # one NVLS channel (one SM's thread block)
    (("nvls_rank_latency",), 0.5e-6, (0.0, 5e-6)),  # per GPU (head) of the NVLS domain
    (("cuda_graph_saving",), 1e-6, (0.0, 10e-6)),  # per collective, graph launch against stream launch
)
SCALARS = ("nvls_overlap_chunks", "nvls_channel_Bps", "nvls_rank_latency", "cuda_graph_saving")  # whole fields
# parameters a generation's rows do not identify, kept at the YAML's value (reason in the YAML comment)
NOT_IDENTIFIED = {"hopper_hgx": {("nvls_rank_latency",)}, "blackwell_nvl72": {("cuda_graph_saving",)}}
# value written from a fitted one: path -> (source path, factor)
TIED = {
    ("efficiency", "nvlink", "ring", "ll128"): (("efficiency", "nvlink", "ring", "simple"), 0.92),  # tuning.cc LL128 * .92
    ("efficiency", "nvlink", "tree", "ll"): (("efficiency", "nvlink", "ring", "ll"), 1.0),
    ("efficiency", "nvlink", "tree", "ll128"): (("efficiency", "nvlink", "ring", "simple"), 0.92),
    ("efficiency", "nvlink", "tree", "simple"): (("efficiency", "nvlink", "ring", "simple"), 1.0),
    ("efficiency", "nvlink", "nvls_tree", "simple"): (("efficiency", "nvlink", "nvls", "simple"), 1.0),
    ("efficiency", "nvlink", "p2p", "ll"): (("efficiency", "nvlink", "ring", "ll"), 1.0),
    ("efficiency", "nvlink", "p2p", "simple"): (("efficiency", "nvlink", "ring", "simple"), 1.0),
    ("hop_latency", "nvlink", "nvls_tree", "simple"): (("hop_latency", "nvlink", "nvls", "simple"), 1.0),
}


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement: a time (s) or an observed choice, with what ran."""

    table: str
    accelerator: str
    gpus: int
    collective: str
    algorithm: str  # auto | forced algorithm
    nvls: bool
    size_bytes: int
    time_s: float | None  # None for choice rows
    choice: str | None = None  # choice rows: "ring/ll", or an algorithm alone
    ran: str | None = None  # what NCCL ran for this row where the set says it ("nvls/simple", "ring")
    fit: bool = True
    nccl_version: str = "default"  # the NCCL release the table was measured with
    cuda_graph: bool = False  # launched in a CUDA graph (nccl-tests -G / an application's graph)


def load_rows(path: Path = MEASUREMENTS) -> list[Row]:
    """Every row of the calibration file, times in seconds."""
    rows = []
    tables = yaml.safe_load(path.read_text())["tables"]
    by_id = {t["id"]: t for t in tables}
    for t in tables:
        items = t.get("rows") or t.get("by_gpus")
        ran_by_key = dict((by_id[t["choices"]].get("rows") or by_id[t["choices"]].get("by_gpus"))) \
            if "choices" in t else {}
        for key, value in items.items():
            gpus = int(key) if "by_gpus" in t else int(t["gpus"])
            size = parse_bytes(str(t.get("size", key)).replace("K", "KiB").replace("M", "MiB").replace("G", "GiB"),
                               f"{t['id']} size")
            quantity = t["quantity"]
            time_s, choice = None, None
            if quantity == "busbw_GBps":
                time_s = size * bus_factor(t["collective"], gpus) / (float(value) * 1e9)
            elif quantity == "time_us":
                time_s = float(value) * 1e-6
            else:
                choice = str(value)
            rows.append(Row(table=t["id"], accelerator=t["accelerator"], gpus=gpus, collective=t["collective"],
                            algorithm=t["algorithm"], nvls=bool(t["nvls"]), size_bytes=size, time_s=time_s,
                            choice=choice, ran=ran_by_key.get(key, t.get("ran")) if time_s is not None else None,
                            fit=bool(t.get("fit", True)) and time_s is not None,
                            nccl_version=str(t.get("nccl_version", "default")),
                            cuda_graph=bool(t.get("cuda_graph", False))))
    return rows


@lru_cache(maxsize=None)
def _accelerator(name: str) -> dict:
    return yaml.safe_load((ACCELERATORS / f"{name}.yaml").read_text())


def links_for(row: Row):
    """The rates of one NVLink domain of ``row.gpus`` GPUs of the row's accelerator."""
    from fabrics.network.nccl.cost import Links, Placement
    from fabrics.nvswitch import NvSwitchDomain

    acc = _accelerator(row.accelerator)
    node = NvSwitchDomain(name=row.accelerator, gpus=row.gpus, max_gpus=int(acc["nvlink_domain_max"]),
                          nvlink_ports=int(acc["nvlink_ports"]), nvlink_rate_Bps=float(acc["nvlink_rate_Bps"]),
                          nvls=row.nvls and bool(acc.get("nvls")))
    links = Links(intra_transport="nvlink", intra_Bps=node.nvlink_bandwidth_Bps, inter_Bps=0.0, gpu_nic_Bps=0.0,
                  nvls=node.nvls, ports=node.nvlink_ports)
    return links, Placement(ranks=row.gpus, nodes=1, per_node=row.gpus)


def predict(gen, row: Row, links_place=None, *, as_ran: bool = False):
    """The model's estimate for one row: the tuner's choice on auto rows, or (``as_ran``, the fit)
    the algorithm/protocol NCCL ran where the set says it."""
    from fabrics.network.nccl.tuner import choose

    links, place = links_place or links_for(row)
    algorithm, protocol = row.algorithm, "auto"
    if as_ran and row.ran:
        algorithm, _, protocol = row.ran.partition("/")
        protocol = protocol or "auto"
    from fabrics.network.nccl.cost import graph_launched

    est = choose(gen, links, place, row.collective, row.size_bytes, algorithm=algorithm, protocol=protocol)
    return graph_launched(gen, est) if row.cuda_graph else est


def at_version(spec, gen, row: Row):
    """``gen`` priced at the NCCL release the row was measured with (each table at its own release)."""
    from dataclasses import replace

    version = spec.versions.get(row.nccl_version)
    if version is None:
        raise SpecError(f"{row.table}: nccl_version={row.nccl_version!r} is not in conf/network/nccl.yaml versions; "
                        f"known: {', '.join(spec.versions)}")
    return gen if gen.version == version else replace(gen, version=version)


def _as_ran_pairs(gen, row: Row, links, place) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs the fit prices a row with (fixed while parameters move): what NCCL
    ran where the set says it, else NCCL's own table's pick where the generation has one, else all."""
    from fabrics.network.nccl.tuner import candidates, nccl_tuned_pair

    pairs = candidates(gen, links, place, row.collective)
    algorithm, _, protocol = (row.ran or row.algorithm).partition("/")
    if algorithm != "auto":
        pairs = [p for p in pairs if p[0] == algorithm]
    if protocol:
        pairs = [p for p in pairs if p[1] == protocol]
    tuned = nccl_tuned_pair(gen, links, place, row.collective, row.size_bytes, pairs)
    return [tuned] if tuned is not None else pairs


# -- parameters <-> vectors ------------------------------------------------------------------------

def best_time(gen, row: Row, links_place, pairs) -> float:
    """The least predicted time over ``pairs`` (the tuner's rule on a fixed candidate list)."""
    from fabrics.network.nccl.cost import COLLECTIVE_ALGORITHMS, graph_launched

    links, place = links_place
    ests = (COLLECTIVE_ALGORITHMS[a](gen, links, place, row.collective, p, row.size_bytes) for a, p in pairs)
    return min((graph_launched(gen, e) if row.cuda_graph else e).time_s for e in ests)


@dataclass(frozen=True)
class FitResult:
    generation: str
    values: dict  # path -> value
    ring_channels: int
    cost: float  # 0.5 * sum of squared log ratios
    gen: object  # the fitted Generation


def fit_generation(gen, rows: list[Row], spec=None) -> FitResult:
    """Bounded least squares on log(predicted / measured) over ``rows``, once per channel count."""
    from scipy.optimize import least_squares

    params = [f for f in FITTED if f[0] not in NOT_IDENTIFIED.get(gen.name, ())]
    x0 = np.array([v for _, v, _ in params])
    lo = np.array([b[0] for _, _, b in params])
    hi = np.array([b[1] for _, _, b in params])
    scale = np.where(x0 != 0, np.abs(x0), hi)
    fit_rows = [r for r in rows if r.fit]
    cached = [links_for(r) for r in fit_rows]
    spec = nccl_spec(default_mapping()) if spec is None else spec
    pairs = [_as_ran_pairs(at_version(spec, gen, r), r, *lp) for r, lp in zip(fit_rows, cached)]
    measured = np.log([r.time_s for r in fit_rows])
    # the tuner's min() makes the cost piecewise smooth: start from NCCL's constants and from the
    # geometric middle of the bounds, keep the better end point (deterministic)
    middle = np.sqrt(np.maximum(lo, 1e-3 * hi) * hi) / scale
    starts = (np.ones_like(x0), middle, np.sqrt(middle * hi / scale))
    best: FitResult | None = None
    for channels in CHANNEL_GRID:
        def residuals(z, channels=channels):
            g = with_values(gen, {p: float(v) for (p, _, _), v in zip(params, z * scale)}, TIED, scalars=SCALARS,
                            ring_channels=channels)
            per_version: dict = {}
            times = []
            for r, lp, pr in zip(fit_rows, cached, pairs):
                gv = per_version.get(r.nccl_version)
                if gv is None:
                    gv = per_version[r.nccl_version] = at_version(spec, g, r)
                times.append(best_time(gv, r, lp, pr))
            return np.log(times) - measured

        for start in starts:
            sol = least_squares(residuals, start, bounds=(lo / scale, hi / scale), method="trf",
                                x_scale=1.0, diff_step=1e-3)
            values = {p: float(v) for (p, _, _), v in zip(params, sol.x * scale)}
            fitted = with_values(gen, values, TIED, scalars=SCALARS, ring_channels=channels)
            result = FitResult(gen.name, values, channels, float(sol.cost), fitted)
            if best is None or result.cost < best.cost - 1e-12:
                best = result
    assert best is not None
    return best


def fit_all(rows: list[Row] | None = None, spec=None) -> dict[str, FitResult]:
    """{generation: FitResult} for every generation with rows in the calibration set."""
    rows = load_rows() if rows is None else rows
    spec = nccl_spec(default_mapping()) if spec is None else spec
    by_gen: dict[str, list[Row]] = {}
    gens = {}
    for r in rows:
        g = spec.generation_for(r.accelerator)
        gens[g.name] = g
        by_gen.setdefault(g.name, []).append(r)
    return {name: fit_generation(gens[name], rs, spec) for name, rs in by_gen.items()}


# -- writing the YAML ------------------------------------------------------------------------------

_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_]+):(?P<value>[^#]*?)(?P<comment>\s*#.*)?$")


def written_values(results: dict[str, FitResult]) -> dict[tuple, str]:
    """{(generation, table, transport, row, proto) | (generation, 'channels', row): text} to write."""
    out = {}
    for name, res in results.items():
        for path, value in res.values.items():
            out[(name, *path)] = format_value(path[0], value)
        for path, (source, factor) in TIED.items():
            base = res.values.get(source, value_at(res.gen, source, SCALARS))
            out[(name, *path)] = format_value(path[0], base * factor)
        out[(name, "channels", "ring")] = out[(name, "channels", "tree")] = str(res.ring_channels)
    return out


def rewrite_yaml(text: str, values: dict[tuple, str]) -> str:
    """``text`` with the scalar of every ``# fitted`` / ``# tied`` line whose key path is in ``values``."""
    stack: list[tuple[int, str]] = []
    out, used = [], set()
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            out.append(line)
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(k for _, k in stack) + (m["key"],)
        value = m["value"].strip()
        key = path[1:] if path and path[0] == "generations" else path
        if value and m["comment"] and re.search(r"#\s*(fitted|tied)", m["comment"]) and key in values:
            new = f"{m['indent']}{m['key']}: {values[key]}"
            comment = m["comment"].lstrip()
            line = f"{new.ljust(max(len(new) + 1, len(line) - len(m['comment'].lstrip())))}{comment}"
            used.add(key)
        if not value:
            stack.append((indent, m["key"]))
        out.append(line)
    missing = sorted(set(values) - used)
    if missing:
        raise SpecError(f"conf/network/nccl.yaml has no '# fitted' / '# tied' line for {'.'.join(missing[0])}")
    return "\n".join(out) + "\n"


# -- reporting -------------------------------------------------------------------------------------

def residual_rows(spec=None, rows: list[Row] | None = None) -> list[dict]:
    """Every calibration row with the prediction of ``spec`` (default: the committed parameters), the
    model choosing on auto rows as a user's run does (the docs' residual table)."""
    rows = load_rows() if rows is None else rows
    spec = nccl_spec(default_mapping()) if spec is None else spec
    out = []
    for r in rows:
        est = predict(at_version(spec, spec.generation_for(r.accelerator), r), r)
        entry = {"table": r.table, "nccl_version": r.nccl_version, "gpus": r.gpus, "size_bytes": r.size_bytes, "collective": r.collective,
                 "choice": est.schedule, "predicted_s": est.time_s}
        if r.time_s is not None:
            entry.update(measured_s=r.time_s, error=est.time_s / r.time_s - 1.0)
        else:
            entry.update(observed=r.choice, agrees=est.schedule == r.choice or est.algorithm == r.choice)
        out.append(entry)
    return out


def human_size(n: int) -> str:
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale:
            return f"{n // scale}{unit}"
    return str(n)


def choice_table(residuals: list[dict]) -> str:
    lines = ["| size | NCCL ran (NCCL_DEBUG) | model's choice | agrees |", "|---:|---|---|---|"]
    for e in residuals:
        if e["table"] == "h200_choice":
            lines.append(f"| {human_size(e['size_bytes'])} | {e['observed']} | {e['choice']} | "
                         f"{'yes' if e['agrees'] else 'no'} |")
    return "\n".join(lines)


def markdown_table(residuals: list[dict]) -> str:
    lines = ["| table | GPUs | size | measured | predicted | error | model's choice |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for e in residuals:
        if "measured_s" not in e:
            continue
        lines.append(f"| {e['table']} | {e['gpus']} | {human_size(e['size_bytes'])} | {e['measured_s'] * 1e6:.1f} us "
                     f"| {e['predicted_s'] * 1e6:.1f} us | {e['error'] * 100:+.1f} % | {e['choice']} |")
    return "\n".join(lines)


PLOT_GROUPS = (  # file name, title, tables (one line each)
    ("nccl_hopper.png", "8 x H100 / H200 all-reduce (NVLink4 NVSwitch)",
     ("h200_default", "h200_nvls_forced", "h100_nvls_forced")),
    ("nccl_gb300.png", "GB300 NVL72 all-reduce", ("gb300_4gpu", "gb300_8gpu", "gb300_64gpu")),
)


def write_plots(residuals: list[dict], folder: Path) -> list[Path]:
    """Predicted vs measured time over message size (and the relative error) per table group, and the
    8 GiB busbw by GPU count; PNGs under ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, title, tables in PLOT_GROUPS:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True, height_ratios=(3, 1.4))
        for k, table in enumerate(tables):
            rows = [e for e in residuals if e["table"] == table and "measured_s" in e]
            x = [e["size_bytes"] for e in rows]
            colour = f"C{k}"
            top.plot(x, [e["measured_s"] * 1e6 for e in rows], "o", color=colour, label=f"{table} measured")
            top.plot(x, [e["predicted_s"] * 1e6 for e in rows], "-", color=colour, label=f"{table} model")
            bottom.plot(x, [e["error"] * 100 for e in rows], "o-", color=colour, ms=3)
        top.set(xscale="log", yscale="log", ylabel="time (us)", title=title)
        top.legend(fontsize=7)
        for bound in (-20, 20):
            bottom.axhline(bound, color="grey", lw=0.6, ls="--")
        bottom.axhline(0, color="black", lw=0.6)
        bottom.set(xscale="log", xlabel="message size (bytes, nccl-tests size)", ylabel="model / measured - 1 (%)")
        fig.tight_layout()
        path = folder / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, table in enumerate(("h200_8g_by_gpus_nvls", "h200_8g_by_gpus_nvls_off")):
        rows = [e for e in residuals if e["table"] == table]
        n = [e["gpus"] for e in rows]
        bus = [e["size_bytes"] * bus_factor("allreduce", e["gpus"]) / 1e9 for e in rows]
        ax.plot(n, [b / e["measured_s"] for b, e in zip(bus, rows)], "o", color=f"C{k}", label=f"{table} measured")
        ax.plot(n, [b / e["predicted_s"] for b, e in zip(bus, rows)], "-", color=f"C{k}", label=f"{table} model")
    ax.set(xlabel="GPUs", ylabel="busbw (GB/s)", title="8 GiB all-reduce on H200 by GPU count")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = folder / "nccl_gpu_count.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [*written, path]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipelines.fit_nccl", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the committed values differ")
    ap.add_argument("--plots", type=Path, default=None, help="write predicted-vs-measured PNGs into this folder")
    ap.add_argument("--table", action="store_true", help="print the residual table (Markdown)")
    args = ap.parse_args(argv)
    from pipelines import fit_nccl_pcie

    results = fit_all()
    pcie = fit_nccl_pcie.fit()
    text = PARAMS_FILE.read_text()
    new = rewrite_yaml(text, {**written_values(results), **fit_nccl_pcie.written_values(pcie)})
    for name, res in results.items():
        print(f"{name}: ring channels {res.ring_channels}, cost {res.cost:.4f}, "
              + ", ".join(f"{'.'.join(p)}={format_value(p[0], v)}" for p, v in res.values.items()))
    if args.check:
        if new != text:
            print("conf/network/nccl.yaml differs from the fit; run python -m pipelines.fit_nccl", file=sys.stderr)
            return 1
    elif new != text:
        PARAMS_FILE.write_text(new)
        print(f"wrote {PARAMS_FILE.relative_to(ROOT)}")
    print(f"{fit_nccl_pcie.GENERATION}: cost {pcie.cost:.6f}, "
          + ", ".join(f"{'.'.join(p)}={format_value(p[0], v)}" for p, v in pcie.values.items()))
    residuals = residual_rows(nccl_spec(yaml.safe_load(new)))
    worst = max(abs(e["error"]) for e in residuals if "error" in e)
    print(f"{sum('error' in e for e in residuals)} timed rows, worst |error| {worst * 100:.1f} %")
    if args.table:
        print(markdown_table(residuals))
        print(choice_table(residuals))
        print(fit_nccl_pcie.markdown_table(fit_nccl_pcie.residuals(pcie.gen)))
    if args.plots is not None:
        for path in write_plots(residuals, args.plots):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

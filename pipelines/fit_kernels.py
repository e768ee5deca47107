"""``python -m pipelines.fit_kernels``: fit the GPU kernel model (gxnet.kernels) to its calibration set.

Reads ``conf/measurements/kernels.yaml`` (transcribed from ``gpu-measurements.md`` section 4) and
fits, by least squares on log(predicted / measured):

- ``kernel_latency_s`` (one value for every GPU: only B200's small kernels were traced, paper
  003 D.3) together with ``hbm_efficiency`` of each accelerator that has HBM rows -- a kernel of D
  bytes lasts latency + D / (eta_D W), so it reaches D / t of the bandwidth;
- ``gemm_efficiency_<q>`` per accelerator and operand precision: large GEMMs, achieved / peak.

What an accelerator was not measured for it takes from its architecture generation (the fit over
the generation's rows as fractions of each one's own peak); what no generation member was
measured for stays absent. The result is written into a marked block at the end of
``conf/accelerator/<name>.yaml`` (``--check``: exit 1 if the committed block differs), the residual
table is printed as Markdown, and ``--plot PATH`` draws predicted against measured.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "conf" / "measurements" / "kernels.yaml"
ACCELERATORS = ROOT / "conf" / "accelerator"
PRECISIONS = ("bf16", "fp8", "fp4")
BEGIN = "# --- kernel model (gxnet.kernels): written by `python -m pipelines.fit_kernels` from"
END = "# --- end of kernel model ---"


@dataclass(frozen=True)
class Residual:
    accelerator: str
    kernel: str
    quantity: str  # what is compared, with its unit
    measured: float
    predicted: float
    fitted: bool  # False: a check the fit did not use

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def load(path: Path = MEASUREMENTS) -> tuple[dict, dict]:
    data = yaml.safe_load(path.read_text())
    accs = {}
    names = {r["accelerator"] for key in ("hbm_stream", "decode_kernels", "kernel_floor", "gemm") for r in data[key]}
    names |= {a for members in data["generations"].values() for a in members}
    for name in sorted(names):
        accs[name] = yaml.safe_load((ACCELERATORS / f"{name}.yaml").read_text())
    return data, accs


def _generation(data: dict, name: str) -> list[str]:
    return next((m for m in data["generations"].values() if name in m), [name])


def _stream_rate(latency_s: float, eta: float, peak_Bps: float, nbytes: float | None) -> float:
    """Achieved bandwidth of one kernel streaming ``nbytes`` (None: the large-size asymptote)."""
    from gxnet.kernels import KernelModel

    if nbytes is None:
        return eta * peak_Bps
    km = KernelModel(latency_s=latency_s, hbm_Bps=eta * peak_Bps, flops_per_s=1.0, precision="bf16")
    return nbytes / km.kernel_s(0.0, nbytes)


def fit_hbm(data: dict, accs: dict) -> tuple[float, dict[str, float]]:
    """(kernel latency, {accelerator: hbm_efficiency}) of the accelerators with HBM rows."""
    from scipy.optimize import least_squares

    measured = sorted({r["accelerator"] for k in ("hbm_stream", "decode_kernels") for r in data[k]})
    index = {a: i + 1 for i, a in enumerate(measured)}

    def residuals(x):
        lat = math.exp(x[0])
        out = []
        for r in data["hbm_stream"]:
            a = r["accelerator"]
            out.append(math.log(_stream_rate(lat, math.exp(x[index[a]]), accs[a]["hbm_bandwidth_Bps"], r["bytes"])
                                / r["rate_Bps"]))
        for r in data["decode_kernels"]:
            a, peak = r["accelerator"], accs[r["accelerator"]]["hbm_bandwidth_Bps"]
            out.append(math.log(_stream_rate(lat, math.exp(x[index[a]]), peak, r["bytes"]) / peak
                                / r["hbm_fraction_of_peak"]))
        out += [math.log(lat / r["min_duration_s"]) for r in data["kernel_floor"]]
        return np.array(out)

    x0 = np.array([math.log(3e-6)] + [math.log(0.85)] * len(measured))
    sol = least_squares(residuals, x0, method="lm", xtol=1e-12, ftol=1e-12)
    return math.exp(sol.x[0]), {a: math.exp(sol.x[index[a]]) for a in measured}


def fit_gemm(data: dict, accs: dict) -> dict[tuple[str, str], float]:
    """{(accelerator, precision): achieved / peak}, the geometric mean of its rows (the log-LS fit)."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in data["gemm"]:
        peak = accs[r["accelerator"]][f"peak_flops_{r['precision']}"]
        out.setdefault((r["accelerator"], r["precision"]), []).append(r["rate_flops"] / peak)
    return {k: float(np.exp(np.mean(np.log(v)))) for k, v in out.items()}


def _pooled(values: dict, name: str, data: dict, key=lambda a: a) -> float | None:
    """An accelerator's own fitted value, else the geometric mean of its generation's."""
    if key(name) in values:
        return values[key(name)]
    pool = [values[key(a)] for a in _generation(data, name) if key(a) in values]
    return float(np.exp(np.mean(np.log(pool)))) if pool else None


def fitted_fields(data: dict, accs: dict) -> dict[str, dict[str, tuple[float, str]]]:
    """{accelerator: {field: (value, where it comes from)}} for every accelerator of the set."""
    latency, hbm = fit_hbm(data, accs)
    gemm = fit_gemm(data, accs)
    floor_of = ", ".join(sorted({r["accelerator"] for r in data["kernel_floor"] + data["decode_kernels"]}))
    out = {}
    for name, acc in accs.items():
        fields = {"kernel_latency_s": (latency, f"fitted: {floor_of} small decode kernels (paper 003, D.3)")}
        eta = _pooled(hbm, name, data)
        if eta is not None:
            fields["hbm_efficiency"] = (eta, "fitted: own rows" if name in hbm else "from its generation")
        for q in PRECISIONS:
            if acc.get(f"peak_flops_{q}") is None:
                continue
            v = _pooled(gemm, name, data, key=lambda a, q=q: (a, q))
            if v is not None:
                fields[f"gemm_efficiency_{q}"] = (v, "fitted: own rows" if (name, q) in gemm else "from its generation")
        # what is committed (4 significant digits) is what the residuals are computed from
        out[name] = {k: (float(f"{v:.4g}"), why) for k, (v, why) in fields.items()}
    return out


def residual_table(data: dict, accs: dict, fields: dict) -> list[Residual]:
    from gxnet.accelerators import EfficiencySteps

    rows = []
    for r in data["hbm_stream"]:
        a, f = r["accelerator"], fields[r["accelerator"]]
        pred = _stream_rate(f["kernel_latency_s"][0], f["hbm_efficiency"][0], accs[a]["hbm_bandwidth_Bps"], r["bytes"])
        rows.append(Residual(a, r["kernel"], "bandwidth TB/s", r["rate_Bps"] / 1e12, pred / 1e12, True))
    for r in data["decode_kernels"]:
        a, f = r["accelerator"], fields[r["accelerator"]]
        peak = accs[a]["hbm_bandwidth_Bps"]
        pred = _stream_rate(f["kernel_latency_s"][0], f["hbm_efficiency"][0], peak, r["bytes"]) / peak
        rows.append(Residual(a, r["kernel"], "fraction of peak HBM", r["hbm_fraction_of_peak"], pred, True))
        steps = EfficiencySteps(upper=tuple(accs[a]["eta_memory"]["upper"]), values=tuple(accs[a]["eta_memory"]["values"]))
        rows.append(Residual(a, r["kernel"], "x B.3 roofline", r["roofline_ratio"], steps(r["bytes"]) / pred, False))
    for r in data["kernel_floor"]:
        f = fields[r["accelerator"]]
        rows.append(Residual(r["accelerator"], r["kernel"], "shortest kernel us", r["min_duration_s"] * 1e6,
                             f["kernel_latency_s"][0] * 1e6, True))
    for r in data["gemm"]:
        a, q = r["accelerator"], r["precision"]
        pred = fields[a][f"gemm_efficiency_{q}"][0] * accs[a][f"peak_flops_{q}"]
        rows.append(Residual(a, f"gemm {q} {r['shape']}", "TFLOP/s", r["rate_flops"] / 1e12, pred / 1e12, True))
    return rows


def markdown(rows: list[Residual]) -> str:
    lines = ["| accelerator | kernel | quantity | measured | predicted | residual |",
             "|---|---|---|---:|---:|---:|"]
    for r in rows:
        note = "" if r.fitted else " (check)"
        lines.append(f"| {r.accelerator} | {r.kernel} | {r.quantity}{note} | {r.measured:.4g} | {r.predicted:.4g} "
                     f"| {r.error * 100:+.1f} % |")
    return "\n".join(lines)


def block(fields: dict[str, tuple[float, str]]) -> str:
    lines = [BEGIN, "# --- conf/measurements/kernels.yaml; rerun the fit rather than editing these lines ---"]
    for key, (value, why) in fields.items():
        lines.append(f"{key}: {value:.4g}".ljust(34) + f"# {why}")
    lines.append(END)
    return "\n".join(lines) + "\n"


def with_block(text: str, new_block: str) -> str:
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n") if END in rest else ""
        return head + new_block + tail
    return text.rstrip("\n") + "\n" + new_block


def plot(path: Path, data: dict, accs: dict, fields: dict, rows: list[Residual]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5))
    sizes = np.logspace(4, 10, 200)
    for name, color in (("h100", "tab:blue"), ("h200", "tab:green"), ("b200", "tab:red")):
        f, peak = fields[name], accs[name]["hbm_bandwidth_Bps"]
        frac = [_stream_rate(f["kernel_latency_s"][0], f["hbm_efficiency"][0], peak, s) / peak for s in sizes]
        ax.plot(sizes, frac, color=color, label=f"{name} model")
        for r in data["hbm_stream"]:
            if r["accelerator"] == name:
                ax.plot(r["bytes"] or 1e10, r["rate_Bps"] / peak, "o", color=color, mfc="none")
        for r in data["decode_kernels"]:
            if r["accelerator"] == name:
                ax.plot(r["bytes"], r["hbm_fraction_of_peak"], "s", color=color)
    steps = accs["b200"]["eta_memory"]
    ax.step([1e4] + list(steps["upper"]) + [1e10], [steps["values"][0]] + list(steps["values"]), where="pre",
            color="grey", ls="--", label="paper B.3 eta_D (roofline)")
    ax.set(xscale="log", xlabel="bytes moved by one kernel", ylabel="fraction of peak HBM bandwidth",
           title="HBM: latency + bytes / (eta_D W); measured: o stream, s D.3", ylim=(0, 1))
    ax.legend(fontsize=8)
    labels = [f"{r.accelerator} {r.kernel}" + ("" if r.fitted else " (check)") for r in rows]
    errors = [r.error * 100 for r in rows]
    colors = ["tab:grey" if not r.fitted else "tab:purple" if r.quantity == "TFLOP/s" else "tab:orange"
              for r in rows]
    bx.barh(range(len(rows)), errors, color=colors)
    bx.set_yticks(range(len(rows)), labels, fontsize=7)
    bx.invert_yaxis()
    bx.axvline(0, color="black", lw=0.8)
    bx.set(xlabel="predicted / measured - 1 (%)", title="residuals: HBM and D.3 (orange), GEMM (purple)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipelines.fit_kernels", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if conf/accelerator/*.yaml differ from the fit")
    ap.add_argument("--plot", type=Path, default=None, help="write predicted vs measured as a PNG")
    args = ap.parse_args(argv)
    data, accs = load()
    fields = fitted_fields(data, accs)
    rows = residual_table(data, accs, fields)
    stale = []
    for name, f in fields.items():
        path = ACCELERATORS / f"{name}.yaml"
        text = path.read_text()
        new = with_block(text, block(f))
        if new != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(new)
    print(markdown(rows))
    if args.plot is not None:
        plot(args.plot, data, accs, fields, rows)
    if args.check and stale:
        print(f"kernel model in {', '.join(stale)} differs from the fit; run python -m pipelines.fit_kernels",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

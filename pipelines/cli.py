"""``gx PIPELINE [overrides]`` == ``python -m pipelines.PIPELINE [overrides]``."""

from __future__ import annotations

import importlib
import sys

# Every pipeline: its module pipelines/<name>.py, its primary config conf/<name>.yaml, one line.
PIPELINES: dict[str, str] = {
    "model": "a model card: parameters, active weights, KV cache per token, memory and largest batch per rank",
    "decode": "time one decode step of a model on a fabric (paper 003, Section 4)",
    "search": "find the best Helix split per cell (paper 003, Appendix B.6)",
    "splits": "list every feasible Helix split of a model at a world size",
    "demand": "the communication demand of one decode step (paper 003, Table 1)",
    "collective": "price one collective: every schedule on a topology, or on a fabric with its network model",
    "plan": "plan the OCS circuits of a deployment's meshes (paper 003, Appendix A)",
    "alltoallv": "schedule and time an AlltoAllv on a PCIe GPU cluster (paper 000)",
    "prefill": "an expert-parallel MoE prefill or decode on a PCIe cluster",
    "calibrate": "time every fused decode kernel on this machine -> calibration.json",
    "replay": "replay an AlltoAllv schedule on real hardware with torch.distributed",
    "report": "render a sweep's comparison from MLflow, without re-running it",
    "sync": "upload to MLflow what a sweep computed while the store was down",
}


def available() -> list[str]:
    return list(PIPELINES)


def usage() -> str:
    width = max(map(len, PIPELINES))
    lines = [f"  {name:<{width}}  {line}" for name, line in PIPELINES.items()]
    return ("usage: gx PIPELINE [hydra overrides]   (gx PIPELINE --help: its options)\n\npipelines:\n"
            + "\n".join(lines))


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in {"-h", "--help"}:
        print(usage(), file=sys.stdout if len(sys.argv) >= 2 else sys.stderr)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    name = sys.argv[1]
    if name not in PIPELINES:
        from pipelines.app import did_you_mean

        hint = did_you_mean(name, PIPELINES, list_all=False)
        print(f"error: {name!r} is not a pipeline{hint} (gx --help lists them: {', '.join(PIPELINES)})",
              file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(f"pipelines.{name}")
    sys.argv = [f"gx {name}", *sys.argv[2:]]
    module.main()


if __name__ == "__main__":
    main()

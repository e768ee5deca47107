"""``gx PIPELINE [overrides]`` == ``python -m pipelines.PIPELINE [overrides]``."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pipelines


def available() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(pipelines.__path__)
        if not m.name.startswith("_") and m.name not in {"app", "cli", "units"} and not m.ispkg
    )


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in {"-h", "--help"}:
        print(f"usage: gx PIPELINE [hydra overrides]\npipelines: {', '.join(available())}")
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    name = sys.argv[1]
    if name not in available():
        print(f"error: unknown pipeline {name!r}; choose one of: {', '.join(available())}", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(f"pipelines.{name}")
    sys.argv = [f"gx {name}", *sys.argv[2:]]
    module.main()


if __name__ == "__main__":
    main()

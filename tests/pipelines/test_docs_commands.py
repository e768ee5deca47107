"""Every ``gx`` command the README and docs/ show composes: its pipeline's config with its
overrides passes the entry check a real run starts with (``precheck_overrides``: Hydra's
composition, the ``+`` rule, schemas, field kinds). Commands with placeholders (``<...>``,
``[a|b]``, ``...``, ``$VAR``) and those that name a user's own config folder are left out."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipelines.cli import PIPELINES

ROOT = Path(__file__).resolve().parents[2]
# an inline `gx ...`, or a line of a code block that starts a pipeline
INLINE = re.compile(r"`(gx [^`]+)`")
LINE = re.compile(r"^\s*(?:gx |(?:\.venv/bin/)?python3? -m pipelines\.(?:cli )?)(\w+)(.*)$")
PLACEHOLDER = re.compile(r"[<\[$]|\.\.\.|…")
# examples of the user's own configs (README: a model file and a platform of their own)
OWN_CONFIGS = ("--config-dir", "--config-path", "hydra.searchpath", "model=mine", "platform=mybox")


def _commands() -> list[tuple[str, str]]:
    found, seen = [], set()
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        text = path.read_text()
        lines = [m.group(1) for m in INLINE.finditer(text)]
        lines += [f"gx {m.group(1)}{m.group(2)}" for m in map(LINE.match, text.splitlines()) if m]
        for line in lines:
            cmd = re.split(r"\s#\s|\s{2,}#", line)[0].strip().rstrip("\\").strip()
            if PLACEHOLDER.search(cmd) or any(o in cmd for o in OWN_CONFIGS) or "\n" in cmd:
                continue
            try:
                parts = shlex.split(cmd)
            except ValueError:
                continue
            if len(parts) >= 2 and parts[1] in PIPELINES and cmd not in seen:
                seen.add(cmd)
                found.append((path.relative_to(ROOT).as_posix(), cmd))
    return found


COMMANDS = _commands()


def test_the_docs_show_many_commands():
    assert len(COMMANDS) >= 60 and {c.split()[1] for _, c in COMMANDS} >= {"decode", "search", "collective", "alltoallv"}


@pytest.mark.parametrize("doc, cmd", COMMANDS, ids=[f"{d}:{c}" for d, c in COMMANDS])
def test_a_documented_command_composes(doc, cmd, monkeypatch, capsys):
    import pipelines.app as app

    monkeypatch.setattr(app, "start_sweep_ray_early", lambda *a, **k: None)  # no Ray for a -m example
    parts = shlex.split(cmd)
    try:
        app.precheck_overrides(parts[1], parts[2:])
    except SystemExit as exit_:
        assert not exit_.code, f"{doc}: `{cmd}` is refused: {capsys.readouterr().err.strip()}"

"""benchmarks/cpu_by_process.py: /proc parsing, process kinds, and a sampled child's CPU."""

import sys

import pytest

from benchmarks.cpu_by_process import HZ, kind_of, parse_stat, run_sampled

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_parse_stat_counts_fields_after_the_last_parenthesis():
    # a command name with a space and a parenthesis, as Ray's renamed processes can have
    fields = ["S", "41", "2", "3", "0", "-1", "4194560", "777", "0", "5", "0", str(3 * HZ), str(HZ // 2)]
    cpu = parse_stat("4242 (ray::run (x)) " + " ".join(fields + ["0"] * 10))
    assert cpu.ppid == 41
    assert cpu.user_s == pytest.approx(3.0)
    assert cpu.sys_s == pytest.approx(0.5)
    assert cpu.minor_faults == 777


@pytest.mark.parametrize("cmdline, kind", [
    ("ray::IDLE", "ray::IDLE"),
    ("/venv/bin/python -m pipelines.tracking_process 12 0 19", "pipelines.tracking_process"),
    ("/venv/bin/python -m pipelines.search -m experiment=figure4_megatron", "pipelines.search"),
    ("/usr/lib/ray/core/src/ray/gcs/gcs_server --port=1", "gcs_server"),
    ("/usr/bin/sleep 1", "sleep"),
    ("", "?"),
])
def test_kind_of(cmdline, kind):
    assert kind_of(cmdline) == kind


def test_a_busy_child_is_counted_with_its_cpu_time_and_nothing_else_is():
    # 0.4 s of its own CPU however busy the host is (the clock read once per 100,000 additions)
    busy = "import time\nx = 0\nwhile time.process_time() < 0.4:\n    for _ in range(100000): x += 1"
    rc, wall_s, by_kind, host = run_sampled([sys.executable, "-c", busy], every_s=0.02)
    assert rc == 0 and wall_s >= 0.3
    name = sys.executable.rsplit("/", 1)[-1]
    user_s, sys_s, n, faults = by_kind[name]
    assert n == 1 and user_s + sys_s >= 0.3 and faults > 0  # the last sample is at most 20 ms old
    assert set(host) == {"user", "system", "idle", "steal"} and host["user"] + host["system"] >= 0.3


def test_first_touch_times_a_fresh_process_per_page():
    from benchmarks.cpu_by_process import first_touch_us

    us = first_touch_us(mib=8)
    assert 0.01 < us < 10_000  # a fresh mapping touched page by page: microseconds, never zero


def test_a_grandchild_is_counted_too():
    busy = "import time\nx = 0\nwhile time.process_time() < 0.3:\n    for _ in range(100000): x += 1"
    parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {busy!r}], check=True)"
    rc, _, by_kind, _ = run_sampled([sys.executable, "-c", parent], every_s=0.02)
    user_s, sys_s, n, _ = by_kind[sys.executable.rsplit("/", 1)[-1]]
    assert rc == 0 and n == 2 and user_s + sys_s >= 0.25

"""CPU time of a command by process kind, and the host's CPU over the same window (Linux /proc).

    python benchmarks/cpu_by_process.py -- .venv/bin/gx search -m experiment=figure4_megatron tracking=mlflow

Where a sweep's CPU goes when the host is short of it: a `gx ... -m` command's processes are
the driver, the tracking process, Ray's GCS, raylet, agents and workers (started by the raylet,
never waited on by the driver, so `time` does not count them). This samples the command and
every process it starts, directly or not (``/proc/<pid>/stat`` every ``--every-s``; a process
whose parent has ended stays counted), keeps each one's last user and system time and minor page
faults, and sums them by kind (the name Ray gives its processes, else the command's first
words). Beside it: the host's user, system, idle and steal time over the command (``/proc/stat``,
all CPUs), which says whether a slow run was short of CPU (little idle), lost it to the
hypervisor (steal) or spent it in the kernel (system). ``--first-touch`` also times a fresh
process's first touch of 1 GiB before the command (:func:`first_touch_us`: the host's price of
new memory). A process that starts and ends between two samples is missed; ``--every-s 0.05``
misses less.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

HZ = os.sysconf("SC_CLK_TCK")
# Ray names its processes (setproctitle); others are known by a module or script in their command line
KINDS = ("ray::IDLE", "ray::run_points", "DashboardAgent", "RuntimeEnvAgent", "gcs_server", "raylet",
         "pipelines.tracking_process", "dashboard/agent.py", "runtime_env/agent", "default_worker")


@dataclass(frozen=True)
class ProcCPU:
    user_s: float
    sys_s: float
    minor_faults: int
    ppid: int = 0


def parse_stat(text: str) -> ProcCPU:
    """User and system seconds, minor faults and parent from a ``/proc/<pid>/stat`` line (the
    command name in parentheses may hold spaces and parentheses: fields are counted after the last ')')."""
    fields = text.rsplit(")", 1)[1].split()
    # after ')': state(0) ppid(1) pgrp session tty tpgid flags minflt(7) cminflt majflt cmajflt utime(11) stime(12)
    return ProcCPU(user_s=int(fields[11]) / HZ, sys_s=int(fields[12]) / HZ, minor_faults=int(fields[7]),
                   ppid=int(fields[1]))


def kind_of(cmdline: str) -> str:
    for kind in KINDS:
        if kind in cmdline:
            return kind
    words = cmdline.split()
    if len(words) >= 3 and words[1] == "-m":  # python -m module ...
        return words[2]
    return words[0].rsplit("/", 1)[-1] if words else "?"


def _read(pid: str) -> tuple[str, ProcCPU] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline") as f:
            cmd = f.read().replace("\0", " ").strip()
    except OSError:  # gone meanwhile
        return None
    return cmd, parse_stat(stat)


def host_ticks() -> list[int]:
    """user, nice, system, idle, iowait, irq, softirq, steal (ticks, all CPUs) from /proc/stat."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def run_sampled(argv: list[str], every_s: float = 0.1) -> tuple[int, float, dict[str, list], dict[str, float]]:
    """Run ``argv``; (exit code, wall s, {kind: [user s, sys s, processes, minor faults]}, host seconds)."""
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    seen: dict[str, tuple[str, ProcCPU]] = {}
    tree: set[int] = set()  # the command and its descendants, as far as sampled (an orphan keeps its place)

    def sample() -> None:
        fresh = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit() and pid not in before:
                got = _read(pid)
                if got is not None:
                    fresh[pid] = got
        grew = True
        while grew:  # a child may be listed before its parent joins the tree
            grew = False
            for pid, (cmd, cpu) in fresh.items():
                if int(pid) in tree or cpu.ppid in tree:
                    if int(pid) not in tree:
                        tree.add(int(pid))
                        grew = True
                    if not cmd and pid in seen:  # an exiting process has no command line left: keep its name
                        cmd = seen[pid][0]
                    seen[pid] = (cmd, cpu)

    h0, t0 = host_ticks(), time.perf_counter()
    proc = subprocess.Popen(argv)
    tree.add(proc.pid)
    while proc.poll() is None:
        sample()
        time.sleep(every_s)
    sample()
    wall_s, h1 = time.perf_counter() - t0, host_ticks()
    by_kind: dict[str, list] = defaultdict(lambda: [0.0, 0.0, 0, 0])
    for pid, (cmd, cpu) in seen.items():
        row = by_kind[kind_of(cmd)]
        row[0] += cpu.user_s
        row[1] += cpu.sys_s
        row[2] += 1
        row[3] += cpu.minor_faults
    d = [(b - a) / HZ for a, b in zip(h0, h1)]
    host = {"user": d[0] + d[1], "system": d[2] + d[5] + d[6], "idle": d[3] + d[4], "steal": d[7]}
    return proc.returncode, wall_s, dict(by_kind), host


FIRST_TOUCH = """
import mmap, sys, time
size = int(sys.argv[1]) << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
t = time.perf_counter()
for off in range(0, size, 4096):
    m[off] = 1
print((time.perf_counter() - t) / (size // 4096) * 1e6)
"""


def first_touch_us(mib: int = 1024) -> float:
    """Microseconds per 4 KiB page for a fresh process's first touch of ``mib`` MiB of anonymous
    memory, the cost every new process pays for the memory it grows into: from ≈ 2 µs where the
    host backs the guest's free memory to 20–30 µs on a VM whose host has taken the free pages
    back (free page reporting). The guest hands out its most recently freed pages first, so a
    small probe sees the warm end; 1 GiB is about what a cold search's processes grow into. Run it
    where it cannot warm the memory of what it is set beside: what it frees stays host-backed for a
    few seconds."""
    out = subprocess.run([sys.executable, "-c", FIRST_TOUCH, str(mib)], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every-s", type=float, default=0.1, help="sampling period")
    ap.add_argument("--first-touch", action="store_true",
                    help="also time a fresh process's first touch of 1 GiB (the host's cost per new page)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    args = ap.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        ap.error("give the command to run after --")
    touch = f"first touch {first_touch_us():.1f} us per 4 KiB page before the command; " if args.first_touch else ""
    rc, wall_s, by_kind, host = run_sampled(argv, args.every_s)
    print(f"{'process':34s} {'n':>3s} {'user s':>7s} {'sys s':>6s} {'faults':>8s}")
    total = [0.0, 0.0]
    for kind, (u, s, n, faults) in sorted(by_kind.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        if u + s >= 0.01:
            print(f"{kind[:34]:34s} {n:3d} {u:7.2f} {s:6.2f} {faults:8d}")
        total[0] += u
        total[1] += s
    print(f"{'all':34s} {'':3s} {total[0]:7.2f} {total[1]:6.2f}")
    print(f"{touch}command: exit {rc}, wall {wall_s:.2f} s; host over it ({os.cpu_count()} CPUs, "
          f"{wall_s * (os.cpu_count() or 1):.1f} CPU s): " + ", ".join(f"{k} {v:.1f} s" for k, v in host.items()))
    sys.exit(rc)


if __name__ == "__main__":
    main()

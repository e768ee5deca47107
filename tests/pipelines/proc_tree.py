"""Process trees from /proc (Linux), for tests that check nothing outlives its parent."""

from pathlib import Path


def children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return kids


def descendants(pid: int) -> set[int]:
    kids, out, todo = children_of(), set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def alive(pids) -> set[int]:
    """The pids that still run (zombies count as gone)."""
    out = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(p)
    return out


def descendants_running(pid: int, needle: bytes) -> set[int]:
    """The descendants of ``pid`` whose command line contains ``needle``."""
    found = set()
    for kid in descendants(pid):
        try:
            if needle in Path(f"/proc/{kid}/cmdline").read_bytes():
                found.add(kid)
        except OSError:
            continue
    return found


def wait_until(pred, timeout_s: float, every_s: float = 0.2) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every_s)
    return bool(pred())

"""One rank of an AlltoAllv replay with torch.distributed (NCCL on GPUs, gloo on CPU).

``replay_rank`` executes every ``ReplayPlan`` activation by activation with real buffers: each
lane's bytes go with ``batch_isend_irecv`` (tag = the lane's position in the activation, posted
in the same global order on every rank), then one barrier closes the activation (the execution
model of paper 000, Eq. 2: a stage starts when the previous one has finished everywhere). A
plan of kind ``all_to_all_single`` is one call with split sizes. Timing runs between a starting
barrier and the last activation's barrier; byte verification happens after the clock stops.

Progress goes to a shared array the parent's watchdog reads (``PROGRESS_FIELDS`` per rank);
it costs one store per activation, nothing on the wire. Entry points: ``spawn_entry`` (one
process per rank from ``launcher.launch``) and ``torchrun_main`` (``python -m
pipelines.hardware.replay_worker plan.json out_dir`` under torchrun, multi-node).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

import numpy as np

from pipelines.hardware.replay_plan import ReplayPlan, mismatches, pattern

PROGRESS_FIELDS = 4  # plan index, iteration, activation, state
# a rank that stops at ENTERED never posted its transfers: the watchdog names the rank furthest behind
STATE_START, STATE_ENTERED, STATE_POSTED, STATE_TRANSFERRED, STATE_DONE, STATE_VERIFY, STATE_FINISHED = -1, 0, 1, 2, 3, 4, 9
WORKER_ERROR_EXIT = 70  # a rank that raised (often because a peer died); the parent looks past it


class _Progress:
    def __init__(self, shared, rank: int):
        self.shared, self.base = shared, rank * PROGRESS_FIELDS

    def set(self, plan: int, iteration: int, activation: int, state: int) -> None:
        if self.shared is not None:
            s, b = self.shared, self.base
            s[b], s[b + 1], s[b + 2], s[b + 3] = plan, iteration, activation, state


def _fault(options: dict, rank: int, plan: int, iteration: int, activation: int) -> None:
    """Config-level fault injection (``fault.rank``/``fault.activation``), for testing a cluster's
    failure handling: the rank exits hard (``kill``) or stops responding (``hang``); ``corrupt``
    is applied to the data instead (``_corrupts``)."""
    f = options.get("fault") or {}
    if f.get("rank") != rank or f.get("plan", 0) != plan or f.get("iteration", 0) != iteration \
            or f.get("activation", 0) != activation:
        return
    mode = f.get("mode", "kill")
    if mode == "hang":
        time.sleep(10 ** 6)
    if mode == "kill":
        os._exit(9)


def _corrupts(options: dict, rank: int, plan: int, iteration: int, activation: int) -> bool:
    """``fault.mode=corrupt``: this rank flips one bit of what it sends there (verification must catch it)."""
    f = options.get("fault") or {}
    return (f.get("mode") == "corrupt" and f.get("rank") == rank and f.get("plan", 0) == plan
            and f.get("iteration", 0) == iteration and f.get("activation", 0) == activation)


def _barrier(dist, device) -> None:
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def _sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _replay_lanes(torch, dist, plan: ReplayPlan, rank: int, device, options: dict, progress: _Progress,
                  plan_index: int) -> dict:
    n_act = len(plan.activations)
    own = {}  # (activation, tag) -> send tensor of this rank's own data (built before the clock starts)
    for a, act in enumerate(plan.activations):
        for lane in act:
            if lane.src == rank and lane.origin == rank:
                own[(a, lane.tag)] = torch.from_numpy(np.concatenate(
                    [pattern(lane.origin, lane.final, off, ln) for off, ln in lane.pieces])).to(device)
    elapsed, act_s, checked, bad, first_bad = [], [], 0, 0, None
    iterations = options["warmup"] + options["iterations"]
    for it in range(iterations):
        relay: dict[tuple[int, int], list] = {}  # (origin, final) -> [(offset, tensor)] held for forwarding
        delivered = []  # (lane, tensor) whose destination is this rank
        times = []
        progress.set(plan_index, it, 0, STATE_ENTERED)
        _barrier(dist, device)
        t0 = time.perf_counter()
        for a in range(n_act):
            progress.set(plan_index, it, a, STATE_ENTERED)
            _fault(options, rank, plan_index, it, a)
            ta = time.perf_counter()
            ops, recvs = [], []
            corrupt = _corrupts(options, rank, plan_index, it, a)
            for lane in plan.activations[a]:
                if lane.src == rank:
                    buf = own.get((a, lane.tag))
                    if buf is None:  # relay: forward bytes received in an earlier activation
                        buf = torch.cat([_held(relay[(lane.origin, lane.final)], off, ln) for off, ln in lane.pieces])
                    if corrupt:
                        buf, corrupt = buf.clone(), False
                        buf[buf.numel() // 2] ^= 1
                    ops.append(dist.P2POp(dist.isend, buf, lane.dst, tag=lane.tag))
                if lane.dst == rank:
                    buf = torch.empty(lane.nbytes, dtype=torch.uint8, device=device)
                    ops.append(dist.P2POp(dist.irecv, buf, lane.src, tag=lane.tag))
                    recvs.append((lane, buf))
            reqs = dist.batch_isend_irecv(ops) if ops else []
            progress.set(plan_index, it, a, STATE_POSTED)
            for req in reqs:
                req.wait()
            progress.set(plan_index, it, a, STATE_TRANSFERRED)
            _sync(torch, device)
            _barrier(dist, device)  # one synchronisation per activation
            times.append(time.perf_counter() - ta)
            progress.set(plan_index, it, a, STATE_DONE)
            for lane, buf in recvs:
                if lane.delivers:
                    delivered.append((lane, buf))
                else:
                    pos = 0
                    for off, ln in lane.pieces:
                        relay.setdefault((lane.origin, lane.final), []).append((off, buf[pos:pos + ln]))
                        pos += ln
        elapsed.append(time.perf_counter() - t0)
        act_s.append(times)
        progress.set(plan_index, it, n_act, STATE_VERIFY)
        for lane, buf in delivered:
            m = mismatches(buf.cpu().numpy(), lane.origin, lane.final, lane.pieces)
            checked += lane.nbytes
            bad += m
            if m and first_bad is None:
                first_bad = f"{m} of {lane.nbytes} B from {lane.src} (data of {lane.origin}) wrong in iteration {it}"
    expected = sum(plan.demand[j][rank] for j in range(plan.world_size)) * iterations
    return {"name": plan.name, "elapsed_s": elapsed, "activation_s": act_s, "checked_bytes": checked,
            "expected_bytes": expected, "mismatched_bytes": bad, "first_mismatch": first_bad}


def _held(pieces: list, off: int, ln: int):
    for start, t in pieces:
        if start <= off and off + ln <= start + t.numel():
            return t[off - start:off - start + ln]
    raise RuntimeError(f"relay does not hold bytes [{off}, {off + ln})")  # plan_from_schedule rules this out


def _replay_single(torch, dist, plan: ReplayPlan, rank: int, device, options: dict, progress: _Progress,
                   plan_index: int) -> dict:
    n, d = plan.world_size, plan.demand
    send_sizes = [d[rank][j] for j in range(n)]
    recv_sizes = [d[j][rank] for j in range(n)]
    send = torch.from_numpy(np.concatenate([pattern(rank, j, 0, d[rank][j]) for j in range(n)])).to(device)
    elapsed, checked, bad, first_bad = [], 0, 0, None
    iterations = options["warmup"] + options["iterations"]
    for it in range(iterations):
        recv = torch.empty(sum(recv_sizes), dtype=torch.uint8, device=device)
        progress.set(plan_index, it, 0, STATE_ENTERED)
        _barrier(dist, device)
        t0 = time.perf_counter()
        _fault(options, rank, plan_index, it, 0)
        work = dist.all_to_all_single(recv, send, output_split_sizes=recv_sizes, input_split_sizes=send_sizes,
                                      async_op=True)
        progress.set(plan_index, it, 0, STATE_POSTED)
        work.wait()
        progress.set(plan_index, it, 0, STATE_TRANSFERRED)
        _sync(torch, device)
        _barrier(dist, device)
        elapsed.append(time.perf_counter() - t0)
        progress.set(plan_index, it, 1, STATE_VERIFY)
        host, pos = recv.cpu().numpy(), 0
        for j in range(n):
            ln = recv_sizes[j]
            m = mismatches(host[pos:pos + ln], j, rank, [(0, ln)]) if ln else 0
            checked, bad, pos = checked + ln, bad + m, pos + ln
            if m and first_bad is None:
                first_bad = f"{m} of {ln} B from {j} wrong in iteration {it}"
    return {"name": plan.name, "elapsed_s": elapsed, "activation_s": [[e] for e in elapsed], "checked_bytes": checked,
            "expected_bytes": sum(recv_sizes) * iterations, "mismatched_bytes": bad, "first_mismatch": first_bad}


def replay_rank(rank: int, world: int, plans: list[dict], options: dict, progress_shared=None,
                local_rank: int | None = None, init_method: str | None = None, gather: bool = False):
    """Run every plan on this rank; returns its reports (one per plan), or with ``gather`` the
    reports of all ranks on rank 0 (None elsewhere). Creates and destroys the process group
    (``init_method`` None: torchrun's env:// rendezvous)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(options.get("threads_per_rank", 1)))
    progress = _Progress(progress_shared, rank)
    progress.set(-1, 0, 0, STATE_START)
    backend = options["backend"]
    if backend == "nccl":  # one GPU per rank
        device = torch.device("cuda", rank % torch.cuda.device_count() if local_rank is None else local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    kwargs = {"backend": backend, "rank": rank, "world_size": world,
              "timeout": timedelta(seconds=float(options["collective_timeout_s"]))}
    if init_method:
        kwargs["init_method"] = init_method
    dist.init_process_group(**kwargs)
    try:
        reports = []
        for i, p in enumerate(plans):
            plan = ReplayPlan.from_json(p)
            run = _replay_single if plan.kind == "all_to_all_single" else _replay_lanes
            reports.append(run(torch, dist, plan, rank, device, options, progress, i))
        _barrier(dist, device)
        progress.set(len(plans), 0, 0, STATE_FINISHED)
        if not gather:
            return reports
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(reports, gathered, dst=0)
        return gathered
    finally:
        dist.destroy_process_group()


def spawn_entry(rank: int, world: int, addr: str, port: int, plans: list[dict], options: dict, progress, queue) -> None:
    """Process target of ``launcher.launch``: report through the queue, exit non-zero on error."""
    try:
        reports = replay_rank(rank, world, plans, options, progress, init_method=f"tcp://{addr}:{port}")
        queue.put(("report", rank, reports))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which names the rank
        queue.put(("error", rank, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"))
        queue.close()
        queue.join_thread()
        os._exit(WORKER_ERROR_EXIT)
    queue.close()
    queue.join_thread()
    # skip interpreter teardown: torch/gloo finalizers can block a finished rank's exit
    os._exit(0)


def torchrun_main(argv: list[str]) -> int:
    """``torchrun ... -m pipelines.hardware.replay_worker REPLAY_INPUT.json OUT_DIR``: every rank
    replays; rank 0 gathers the reports and writes ``OUT_DIR/rank_reports.json``, which
    ``pipelines.replay reports=OUT_DIR/rank_reports.json`` turns into results.json. torchrun's
    agent ends the job when a rank dies (use ``--max-restarts=0``); collectives time out after
    ``collective_timeout_s``."""
    if len(argv) != 2:
        print("usage: torchrun ... -m pipelines.hardware.replay_worker REPLAY_INPUT.json OUT_DIR", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gathered = replay_rank(rank, world, spec["plans"], spec["options"],
                           local_rank=int(os.environ.get("LOCAL_RANK", "0")), gather=True)
    if rank == 0:
        os.makedirs(argv[1], exist_ok=True)
        with open(os.path.join(argv[1], "rank_reports.json"), "w") as f:
            json.dump({"world_size": world, "reports": gathered}, f)
    return 0


if __name__ == "__main__":
    sys.exit(torchrun_main(sys.argv[1:]))

"""Simlette parameters: mode, buffers, flit sizes, latency split (paper 003, Section 5.2-5.3, C.5).

Latency split of one remote access (Table 9, nominal): the source pays SM->L2 70 + TX 30 +
MMU/TLB 250 = 350 ns before its first port; every cable 10 ns; an EPS switch 300 ns (RX 70 +
core 200 + TX 30), an OCS 10 ns pass-through; the destination pays RX 70 + L2->SM 70 = 140 ns.
One EPS hop = 350 + 10 + 300 + 10 + 140 = 810 ns, one OCS hop = 350 + 10 + 10 + 10 + 140 = 520 ns
(lambda = 0.52 us, Section 5.3). The numbers come from ``fabrics.scaleup.latency.LatencyBudget``.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError

TL_FLIT_BYTES = 64  # UALink transaction-layer flit (Section 5.2)
DL_FLIT_BYTES = 640  # data-link flit: ten TL flits; switching and credits work at this granularity
MODES = ("flit", "optimized")
SPRAY = ("source", "message")
PHASE_SYNC = ("auto", "rank", "group")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimletteParams:
    mode: str = "optimized"  # "flit": one event per DL flit per hop; "optimized": one per message per hop (C.5)
    buffer_bytes: int | None = None  # receive buffer per port and credit channel; None = unlimited
    tl_flit_bytes: int = TL_FLIT_BYTES
    dl_flit_bytes: int = DL_FLIT_BYTES
    source_latency_s: float = 350e-9  # SM->L2 + accelerator TX + MMU/TLB, paid before the first port
    sink_latency_s: float = 140e-9  # accelerator RX + L2->SM, paid after the last cable
    credit_protocol_s: float = 100e-9  # credit return: port TX + RX protocol, plus the link's cables
    write_responses: bool = False  # send a one-TL-flit response per message on the response channel
    # EPS packet spraying: "source" - one round-robin pointer per source, continuing across messages;
    # "message" - every message deals its flits round-robin starting at the first path
    spray: str = "source"
    # when a rank starts phase k+1: "rank" - once its own phase-k data has arrived (persistent
    # kernels, data-driven); "group" - once every rank of its group has (the barrier of the native
    # one-/two-shot kernels between reduce-scatter and all-gather, TensorRT-LLM ``block_barrier``);
    # "auto" - group for native schedules on EPS fabrics, rank for library schedules
    phase_sync: str = "auto"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SpecError(f"network.mode={self.mode!r} is unknown; choose one of: {', '.join(MODES)}")
        if self.spray not in SPRAY:
            raise SpecError(f"network.spray={self.spray!r} is unknown; choose one of: {', '.join(SPRAY)}")
        if self.phase_sync not in PHASE_SYNC:
            raise SpecError(f"network.phase_sync={self.phase_sync!r} is unknown; choose one of: {', '.join(PHASE_SYNC)}")
        if self.buffer_bytes is not None:
            if isinstance(self.buffer_bytes, bool) or not isinstance(self.buffer_bytes, int) or self.buffer_bytes < self.dl_flit_bytes:
                raise SpecError(
                    f"network.buffer={self.buffer_bytes!r} bytes must hold at least one {self.dl_flit_bytes} B DL flit; "
                    "give e.g. 4KiB or unlimited"
                )
        if self.tl_flit_bytes < 1 or self.dl_flit_bytes % self.tl_flit_bytes:
            raise SpecError(
                f"dl_flit_bytes={self.dl_flit_bytes} must be a positive multiple of tl_flit_bytes={self.tl_flit_bytes}"
            )
        for name in ("source_latency_s", "sink_latency_s", "credit_protocol_s"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"network.{name}={getattr(self, name)!r} must be a non-negative number of seconds")

    @property
    def buffer_flits(self) -> int | None:
        """Credits per port and channel, counted in DL flits (a flit occupies one slot, Section 5.2)."""
        return None if self.buffer_bytes is None else self.buffer_bytes // self.dl_flit_bytes

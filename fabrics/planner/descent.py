"""The compiled coordinate descent of the shared-host planner (``descent_kernel.c``), when built.

The descent over one bit partition (``shared_host._search_partition``) visits ≈ 2,000 leaves per
figure-4 request, each a few dozen Python operations: the leaf rows, the lower bounds, the
generator atoms and the multiplicity greedy. ``setup.py`` builds the same loop in C as the
optional extension ``fabrics.planner._descent_kernel`` (``pip install``, ``pip install -e`` or
``python setup.py build_ext --inplace``; -O3, no FMA contraction). It computes the same floats in
the same order, so plans are bit-identical; what stays in Python (building a leaf row, pricing an
axis-local generator set at a multiplicity) is reached by callbacks, once per new value.

Without the build ``load_descent_kernel()`` returns None and the planner runs its Python
descent, the reference (``tests/unit/test_fabrics_planner_kernel.py`` compares both);
``use_compiled_descent(False)`` selects the Python descent with the build, too.
"""

from __future__ import annotations

from collectives.compiled import OptionalExtension

MODULE = "fabrics.planner._descent_kernel"
ABI = 2  # DK_ABI of descent_kernel.c: the argument list of descend()
MAX_AXES, MAX_OPTIONS, MAX_WORDS = 8, 255, 64  # the kernel's limits (larger searches stay in Python)
_EXTENSION = OptionalExtension(MODULE, ABI)


def use_compiled_descent(on: bool) -> bool:
    """Use the built descent (True, the default) or the Python one; returns the previous choice."""
    return _EXTENSION.use(on)


def load_descent_kernel():
    """The built extension module, or None (not built, another ABI, or ``use_compiled_descent(False)``)."""
    return _EXTENSION.load()


class KernelTables:
    """What the compiled descent keeps between partitions and requests, one pure cache emptied as
    one piece (so an id never names two sets): ids of axis-local generator sets, per bit block the
    set id of every supported set met (σ-independent), per (λ, R, axis key) the times of the
    sets by multiplicity (``descent_kernel.c``'s FullTable and TimeTable), and per aligned ladder
    its options as the kernel reads them."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.sets: list[tuple[int, ...]] = []  # id -> axis-local masks
        self._full: dict[tuple[int, ...], object] = {}
        self._times: dict[tuple, object] = {}
        self._options: dict[tuple, tuple] = {}  # (aligned ladder key, words) -> (bitsets, set ids)

    def __len__(self) -> int:
        return len(self.sets)

    def clear(self) -> None:
        self.ids.clear()
        self.sets.clear()
        self._full.clear()
        self._times.clear()
        self._options.clear()

    def set_id(self, a: int, local: tuple[int, ...]) -> int:
        key = (a, local)
        hit = self.ids.get(key)
        if hit is None:
            hit = self.ids[key] = len(self.sets)
            self.sets.append(local)
        return hit

    def full_table(self, kernel, bits: tuple[int, ...], words: int):
        hit = self._full.get((bits, words))
        if hit is None:
            hit = self._full[(bits, words)] = kernel.FullTable(words)
        return hit

    def options(self, key: tuple, build) -> tuple[list[bytes], list[int]]:
        """A ladder's option bitsets and set ids (``build()`` the first time)."""
        hit = self._options.get(key)
        if hit is None:
            hit = self._options[key] = build()
        return hit

    def time_table(self, kernel, key: tuple):
        """``key``: (λ, R, axis key)."""
        hit = self._times.get(key)
        if hit is None:
            hit = self._times[key] = kernel.TimeTable()
        return hit


def bitset_bytes(bitset: int, words: int) -> bytes:
    return bitset.to_bytes(8 * words, "little")


def fits_kernel(active: list[int], ladders: dict, words: int) -> bool:
    return len(active) <= MAX_AXES and words <= MAX_WORDS and all(len(ladders[k]) <= MAX_OPTIONS for k in active)

"""One generic registry for every pluggable family (schedules, fabrics, schedulers, network models).

Registry keys are the Hydra option names. Duplicate keys raise (unlike vidur's base registry,
which silently overwrites). Lives in ``collectives`` (the lowest room) so all rooms can use it.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from collectives.errors import SpecError

T = TypeVar("T")


class Registry(Generic[T]):
    """A named family of pluggable items; ``family`` is used in error messages."""

    def __init__(self, family: str):
        self.family = family
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@SCHEDULES.register("ring")``."""

        def deco(item: T) -> T:
            self.add(name, item)
            return item

        return deco

    def add(self, name: str, item: T) -> None:
        if name in self._items:
            raise KeyError(f"duplicate {self.family} key {name!r}")
        self._items[name] = item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items))
            raise SpecError(f"unknown {self.family} {name!r}; choose one of: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

    def names(self) -> list[str]:
        return sorted(self._items)

"""Optional compiled extensions with a Python fallback: load once, check the ABI, switchable.

``setup.py`` builds a few hot loops in C as optional extensions (the balanced trees' assignment,
the shared-host planner's descent). Each is used through one :class:`OptionalExtension`: the
module when it is built and speaks the expected argument list (its ``abi()``), else None, and
``use(False)`` selects the Python reference even with the build (tests compare both).
"""

from __future__ import annotations

import importlib


class OptionalExtension:
    def __init__(self, module: str, abi: int) -> None:
        self.module_name, self.abi = module, abi
        self.compiled = True
        self._loaded = False
        self._module = None

    def use(self, on: bool) -> bool:
        """Use the built extension (True, the default) or the Python path; returns the previous choice."""
        previous, self.compiled = self.compiled, bool(on)
        return previous

    def load(self):
        """The built module, or None (not built, another ABI, or switched off)."""
        if not self.compiled:
            return None
        if not self._loaded:
            try:
                module = importlib.import_module(self.module_name)
                self._module = module if module.abi() == self.abi else None
            except ImportError:
                self._module = None
            self._loaded = True
        return self._module

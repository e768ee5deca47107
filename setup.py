"""Build step of the package metadata in pyproject.toml: the compiled VarioPath planning loop and
the shared-host OCS planner's coordinate descent (``fabrics/planner/descent_kernel.c`` ->
``fabrics.planner._descent_kernel``, the same kind of optional extension with a Python fallback),
the balanced trees' last-hop assignment (``collectives/tree_kernel.c`` ->
``collectives._tree_kernel``, likewise) and Simlette's port loop
(``fabrics/network/simlette/engine_core.c`` -> ``fabrics.network.simlette._engine_core``, likewise).

``collectives/alltoallv/variopath_kernel.c`` becomes the extension module
``collectives.alltoallv._variopath_kernel`` on ``pip install`` (and in place on ``pip install -e``
or ``python setup.py build_ext --inplace``). The extension is optional: without a C compiler or
Python headers the install still succeeds and the planner runs its numpy loop (one warning).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -ffp-contract=off: no FMA contraction, so the loop computes the same float64 values as the
# numpy path (tests compare schedules); no -march, so a built wheel runs on any x86-64 / arm64.
UNIX_FLAGS = ["-O3", "-ffp-contract=off"]


class BuildKernel(build_ext):
    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *UNIX_FLAGS]
        super().build_extensions()


setup(
    ext_modules=[Extension("collectives.alltoallv._variopath_kernel", ["collectives/alltoallv/variopath_kernel.c"],
                           libraries=["m"], optional=True),
                 Extension("fabrics.planner._descent_kernel", ["fabrics/planner/descent_kernel.c"],
                           libraries=["m"], optional=True),
                 Extension("collectives._tree_kernel", ["collectives/tree_kernel.c"], optional=True),
                 Extension("fabrics.network.simlette._engine_core", ["fabrics/network/simlette/engine_core.c"],
                           libraries=["m"], optional=True)],
    cmdclass={"build_ext": BuildKernel},
)

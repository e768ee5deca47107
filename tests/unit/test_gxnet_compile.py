import sympy as sp

from gxnet.compile import EVAL_SYMBOLS, CollectiveSlot, KernelSlot, compiled_program
from gxnet.precision import PrecisionSpec
from gxnet.testing import accelerator, model


def test_lambdified_values_match_symbolic_substitution():
    prog = compiled_program(model("gpt_oss_120b"), "helix", PrecisionSpec(), accelerator("b200"))
    args = (3, 4096, 2, 4, 8, 1, 2, 1, 2)
    vals = prog.evaluate(*args)
    subs = dict(zip(EVAL_SYMBOLS, args))
    for _, n in prog.graph.nodes():
        if n.is_collective:
            slot = next(s for sec in prog.sections for s in sec.slots if s.name == n.name)
            assert vals[slot.index] == sp.sympify(n.attrs["payload_bytes"]).subs(subs)
        elif "time_s" in n.attrs:
            slot = next(s for sec in prog.sections for s in sec.slots if s.name == n.name)
            assert abs(vals[slot.index] - float(n.attrs["time_s"].subs(subs))) <= 1e-12 * (1 + vals[slot.index])


def test_program_is_compiled_once_per_family():
    a = compiled_program(model("megatron_1t"), "helix", PrecisionSpec(), accelerator("rx00"))
    b = compiled_program(model("megatron_1t"), "helix", PrecisionSpec(), accelerator("rx00"))
    assert a is b
    kinds = [type(s) for s in a.sections[1].slots]
    assert kinds.count(CollectiveSlot) == 4 and kinds.count(KernelSlot) == 6

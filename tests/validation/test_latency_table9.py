"""Table 9 rows and the λ ≈ 0.52 µs of Section 5.3, derived from the decomposition rules."""

import pytest

from fabrics.scaleup.latency import LatencyBudget

TABLE9 = {  # switch total, switch core, MMU+TLB, GPU MMU, link TLB, total (ns)
    "low": (200, 100, 350, 217, 133, 810),
    "nominal": (300, 200, 250, 155, 95, 810),
    "high": (500, 400, 50, 31, 19, 810),
}


@pytest.mark.parametrize("case", list(TABLE9))
def test_table9_row(case):
    row = LatencyBudget(case=case).table9_row_ns()
    got = (row["switch_total"], row["switch_core"], row["mmu_tlb"], row["gpu_mmu"], row["link_tlb"],
           row["total_per_switched_hop"])
    assert got == pytest.approx(TABLE9[case], abs=0.5)


def test_ocs_lambda_section_5_3():
    assert LatencyBudget().ocs_hop_s == pytest.approx(0.52e-6, rel=1e-9)
    # Switch latency is about a third of an EPS hop (Section 5.3); OCS pass-through ~2 %.
    b = LatencyBudget()
    assert 0.3 < b.switch_total_s / b.switched_hop_s < 0.4
    assert b.ocs_pass_through_s / b.ocs_hop_s < 0.03

import pytest
from hypothesis import given, strategies as st

from collectives.errors import SpecError
from pipelines.units import parse_bytes, parse_count, parse_rate, parse_time


@pytest.mark.parametrize("text,expected", [
    ("4KiB", 4096), ("4kB", 4000), ("66B", 66), ("1MiB", 2**20), ("1MB", 10**6), (512, 512), ("0.5KiB", 512),
])
def test_bytes(text, expected):
    assert parse_bytes(text) == expected


def test_rates_and_times():
    assert parse_rate("400Gb/s") == pytest.approx(5e10)
    assert parse_rate("64GB/s") == pytest.approx(6.4e10)
    assert parse_rate("1.6Tb/s") == pytest.approx(2e11)
    assert parse_time("0.52us") == pytest.approx(5.2e-7)
    assert parse_time("810ns") == pytest.approx(8.1e-7)
    assert parse_time("2ms") == pytest.approx(2e-3)


def test_counts_are_decimal_unless_binary():
    assert parse_count("5M") == 5_000_000
    assert parse_count("32K") == 32_000
    assert parse_count("32Ki") == 32768
    assert parse_count(7) == 7


@pytest.mark.parametrize("bad", ["5Q", "fast", "4 KiBs", "", "1.5B", "-3KiB"])
def test_malformed_is_one_line_spec_error(bad):
    with pytest.raises(SpecError) as info:
        parse_bytes(bad, "size")
    assert "\n" not in str(info.value) and "size" in str(info.value)


@given(st.integers(min_value=0, max_value=2**40))
def test_kib_roundtrip(n):
    assert parse_bytes(f"{n}KiB") == n * 1024
    assert parse_bytes(f"{n}kB") == n * 1000

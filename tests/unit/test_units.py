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


# --- field kinds: the one numeric rule of the config edge -------------------------------------
from pipelines.units import KINDS  # noqa: E402


@pytest.mark.parametrize("kind,value,base", [
    ("count", "5M", 5_000_000), ("count", 8, 8), ("count", "32Ki", 32768), ("index", 0, 0),
    ("size_bytes", "4KiB", 4096), ("rate_Bps", "400Gb/s", 5e10), ("time_s", 0, 0.0), ("time_s", "10ns", 1e-8),
    ("timeout_s", "500ms", 0.5), ("fraction", 0.07, 0.07), ("fraction", 1, 1.0), ("positive", 0.8, 0.8),
    ("nonnegative", 0, 0.0),
])
def test_each_kind_takes_its_values_in_base_units(kind, value, base):
    assert KINDS[kind].check(value, "x") == pytest.approx(base)


@pytest.mark.parametrize("kind,value,problem", [
    ("count", float("nan"), "not a finite number"), ("count", float("inf"), "not a finite number"),
    ("count", 0, "out of range"), ("count", -2, "out of range"), ("count", 1.5, "not whole"),
    ("count", "5Q", "not a valid count"), ("count", True, "not a valid count"),
    ("index", -1, "out of range"), ("size_bytes", 0, "out of range"), ("size_bytes", "1.5B", "not whole"),
    ("size_bytes", "4KB/s", "not a valid size"), ("rate_Bps", float("inf"), "not a finite number"),
    ("rate_Bps", 0, "out of range"), ("rate_Bps", "-400Gb/s", "not a valid rate"),
    ("time_s", "-1us", "not a valid time"), ("time_s", -1e-6, "out of range"), ("timeout_s", "0s", "out of range"),
    ("fraction", 2, "out of range"), ("fraction", float("nan"), "not a finite number"),
    ("positive", 0, "out of range"), ("nonnegative", -1, "out of range"),
])
def test_each_kind_refuses_with_one_line_naming_field_value_and_rule(kind, value, problem):
    with pytest.raises(SpecError) as info:
        KINDS[kind].check(value, "fabric.x")
    msg = str(info.value)
    assert problem in msg and msg.startswith(f"fabric.x={value!r}") and KINDS[kind].rule in msg and "\n" not in msg


def test_a_count_error_names_the_suffixes():
    with pytest.raises(SpecError, match="K/M/G"):
        KINDS["count"].check("5Q", "context")


@pytest.mark.parametrize("parse", [parse_bytes, parse_rate, parse_time, parse_count])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_no_parser_takes_nan_or_infinity(parse, value):
    with pytest.raises(SpecError, match="finite"):
        parse(value, "x")

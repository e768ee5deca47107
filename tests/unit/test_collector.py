"""The cyclic collector's pace in gxnet's processes (pipelines.collector)."""

from __future__ import annotations

import gc

import pytest

from pipelines import collector


@pytest.fixture
def thresholds(monkeypatch):
    before = gc.get_threshold()
    monkeypatch.delenv(collector.ENV, raising=False)
    yield
    gc.set_threshold(*before)


def test_raises_the_young_threshold_and_keeps_the_older_ones(thresholds):
    gc.set_threshold(700, 10, 10)
    collector.pace_collector()
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 10, 10)


def test_never_lowers_a_higher_threshold_nor_starts_a_stopped_collector(thresholds):
    gc.set_threshold(10 * collector.YOUNG_THRESHOLD, 5, 5)
    collector.pace_collector()
    assert gc.get_threshold() == (10 * collector.YOUNG_THRESHOLD, 5, 5)
    gc.set_threshold(0, 10, 10)  # threshold 0: whoever runs us switched the collector off
    collector.pace_collector()
    assert gc.get_threshold()[0] == 0


@pytest.mark.parametrize("raw, young", [("700", 700), ("123456", 123456), ("0", collector.YOUNG_THRESHOLD),
                                        ("-5", collector.YOUNG_THRESHOLD), ("fast", collector.YOUNG_THRESHOLD)])
def test_the_environment_sets_it(thresholds, monkeypatch, raw, young):
    gc.set_threshold(2000, 10, 10)
    monkeypatch.setenv(collector.ENV, raw)
    collector.pace_collector()
    assert gc.get_threshold()[0] == young


def test_a_sweep_worker_paces_its_collector(thresholds):
    from pipelines.sweep import run_points

    gc.set_threshold(700, 10, 10)
    run_points("model", [])  # no points: only the set-up runs
    assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD

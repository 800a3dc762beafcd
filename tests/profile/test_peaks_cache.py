"""Peaks cached for this GPU are read in the driver: no child process, no exclusive GPU lock."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from importlib.metadata import version

import pytest

from tritonforge.profile import session
from tritonforge.profile.roofline import Peaks, store_cached

GPU = "NVIDIA H100 80GB HBM3"


@pytest.fixture()
def peaks(tmp_path, monkeypatch) -> Peaks:
    monkeypatch.setenv("TRITONFORGE_CACHE_DIR", str(tmp_path))
    return Peaks(GPU, version("torch"), 3000.0, 700.0, 700.0, 50.0, 350.0, 132)


def test_cached_peaks_skip_the_child_and_the_lock(peaks, monkeypatch):
    store_cached(peaks)
    monkeypatch.setattr(session, "_visible_gpu_name", lambda: GPU)
    monkeypatch.setattr(session, "gpu_lock", lambda mode: pytest.fail("took the GPU lock"))
    assert session.measure_peaks_isolated() == (peaks, None)


@pytest.mark.parametrize("gpu", ["NVIDIA H200", None])      # another GPU; nvidia-smi silent
def test_a_miss_measures_in_a_child(peaks, monkeypatch, gpu):
    store_cached(peaks)
    monkeypatch.setattr(session, "_visible_gpu_name", lambda: gpu)
    other = dataclasses.replace(peaks, gpu="NVIDIA H200", dram_bw_gbs=4000.0)
    children = []

    def child(cmd, **kwargs):
        children.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "\n" + json.dumps(dataclasses.asdict(other)), "")

    monkeypatch.setattr(session.subprocess, "run", child)
    assert session.measure_peaks_isolated() == (other, None)
    assert len(children) == 1 and "measure_peaks" in children[0][-1]

"""The Hopper GEMM suite, checked without a GPU (nvcc where installed).

What is checked: each version's geometry read from its source, and that the entry named in the
suite is the one the source defines; every shape against each version's size multiples; the
persistent grid (never more CTAs than tiles, nor than the clusters that fit, and whole
clusters); the shared-memory budget; and, where nvcc is installed, a compile without spills.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import suite_module

from curriculum.bench.api import discover_versions

TOPIC_DIR = Path(__file__).resolve().parents[2] / "kernels" / "gemm_hopper"
hop = suite_module("gemm_hopper")
VERSIONS = discover_versions(TOPIC_DIR)


def test_each_version_names_one_kernel_after_its_attributes() -> None:
    entries = [hop.entry_of(v.stem, hop.with_includes(v.source)) for v in VERSIONS]
    assert entries[:3] == ["gemm_bf16_tma_store", *["gemm_bf16_cluster_multicast"] * 2]
    own = [e for v, e in zip(VERSIONS, entries, strict=True) if "#include" not in v.source]
    assert len(set(own)) == len(own)
    with pytest.raises(ValueError, match="one extern"):
        hop.entry_of("x", VERSIONS[0].source + VERSIONS[1].source)


def test_03_compiles_02_with_a_cluster_scope_release() -> None:
    by_stem = {v.stem: v.source for v in VERSIONS}
    own = by_stem["03_release_cluster"]
    assert '#include "02_cluster_multicast.cu"' in own and "constexpr" not in own
    assert own.index("#define GH_RELEASE_SEMANTICS") < own.index("#include")
    expanded = hop.with_includes(own)
    assert by_stem["02_cluster_multicast"] in expanded
    assert '"mbarrier.arrive" GH_RELEASE_SEMANTICS ".shared::cluster' in expanded


def test_geometry_is_read_from_the_source() -> None:
    by_stem = {v.stem: hop.geometry(v.stem, hop.with_includes(v.source)) for v in VERSIONS}
    assert by_stem["01_tma_store"].cluster == 1
    assert by_stem["02_cluster_multicast"].cluster == 2
    assert by_stem["03_release_cluster"].cluster == 2
    for g in by_stem.values():
        assert (g.bm, g.bn, g.bk, g.threads) == (128, 256, 64, 384)
        assert g.smem <= 227 * 1024


def test_geometry_refuses_a_source_without_its_constants() -> None:
    with pytest.raises(ValueError, match="CLUSTER"):
        hop.geometry("01_tma_store", "constexpr int BM = 128;\n")


def test_every_shape_fits_every_version() -> None:
    for v in VERSIONS:
        g = hop.geometry(v.stem, hop.with_includes(v.source))
        for shape in (*hop.SHAPES, *hop.CHECK_SHAPES):
            assert g.accepts(shape), (v.stem, shape)
    g2 = hop.geometry("02_cluster_multicast", VERSIONS[1].source)
    assert not g2.accepts({"m": 128 * 3, "n": 256, "k": 64})  # an odd number of tile rows


def test_persistent_grid_is_whole_clusters_within_what_fits() -> None:
    g = hop.geometry("02_cluster_multicast", VERSIONS[1].source)
    assert g.grid(4096, 4096, clusters_at_once=66) == 132
    assert g.grid(1024, 1024, clusters_at_once=66) == 32  # 8 x 4 tiles, 16 clusters
    assert g.grid(8192, 8192, clusters_at_once=65) == 130
    for m, n in ((1024, 1024), (2048, 2048), (8192, 6144)):
        assert g.grid(m, n, 66) % g.cluster == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_compiles_for_hopper_without_spills(tmp_path: Path) -> None:
    for v in VERSIONS:
        run = subprocess.run(
            ["nvcc", "-gencode", "arch=compute_90a,code=sm_90a", "--resource-usage", "-c",
             str(v.path), "-o", str(tmp_path / f"{v.stem}.o")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "0 bytes spill stores" in run.stderr and "serialized" not in run.stderr

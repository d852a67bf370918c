"""The broken kernels of kernels/bugs/, their sanitizer artifacts, and the FP4 error table."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from curriculum import artifacts, sanitize
from curriculum.microscaling import e2m1, e4m3, errors, mxfp4, nvfp4

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "kernels" / "bugs"
PROGRAMS = BUGS / "programs"
TOOL_FOR = dict(sanitize.BUGS)


def test_the_bugs_folder_is_not_a_bench_topic():
    from curriculum.bench.suites import topic_dirs

    assert not list(BUGS.glob("*.cu"))
    assert "bugs" not in [p.name for p in topic_dirs(ROOT)]


def test_every_bug_file_is_listed_once_with_a_tool():
    files = sorted(p.stem for p in PROGRAMS.glob("*.cu"))
    assert files == sorted(k.split("/")[1] for k in TOOL_FOR)
    assert all(re.fullmatch(r"\d{2}_[a-z0-9_]+", f) for f in files)
    assert set(sanitize.EXPECTED) == set(TOOL_FOR)


@pytest.mark.parametrize("kernel_id", sorted(TOOL_FOR))
def test_header_says_what_is_wrong_and_what_the_tool_reports(kernel_id):
    text = sanitize.source_of(ROOT, kernel_id).read_text()
    head = text.split("#include", 1)[0]
    assert "What is wrong:" in head
    assert f"compute-sanitizer --tool {TOOL_FOR[kernel_id]}" in head
    assert "int main()" in text and "the bug" in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("kernel_id", sorted(TOOL_FOR))
def test_compiles_with_nvcc(kernel_id, tmp_path):
    src = sanitize.source_of(ROOT, kernel_id)
    done = subprocess.run(["nvcc", *sanitize.NVCC, "-o", str(tmp_path / "a.out"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


CAPTURED = sorted((BUGS / "artifacts").glob("*.txt")) if (BUGS / "artifacts").is_dir() else []
needs_capture = pytest.mark.skipif(
    not CAPTURED, reason="no sanitizer output committed yet: run `curriculum artifacts --sanitize` "
                         "on a machine with an NVIDIA GPU and commit kernels/bugs/artifacts/")


@needs_capture
@pytest.mark.parametrize("kernel_id", sorted(TOOL_FOR))
def test_artifact_exists_and_shows_the_promised_error(kernel_id):
    path = BUGS / "artifacts" / sanitize.artifact_name(kernel_id, TOOL_FOR[kernel_id])
    assert path.is_file(), f"run `{artifacts.command_for(kernel_id)}` on a GPU machine"
    text = path.read_text()
    assert text.startswith(f"// {kernel_id}: ")
    assert f"compute-sanitizer --tool {TOOL_FOR[kernel_id]}" in text
    assert re.search(sanitize.EXPECTED[kernel_id], sanitize.tool_section(text)), \
        sanitize.EXPECTED[kernel_id]
    assert kernel_id.split("/")[1] + ".cu:" in text  # the tool names the source line
    assert not re.search(r"/(home|root|work|tmp)/", text)  # no machine paths


@needs_capture
def test_cuda_gdb_session_stops_in_the_kernel():
    path = BUGS / "artifacts" / sanitize.artifact_name(sanitize.GDB_TARGET, "cuda-gdb")
    assert path.is_file()
    text = path.read_text()
    assert "CUDA_EXCEPTION" in text and "sum4" in text


def test_artifact_caption_names_the_sanitize_command():
    assert artifacts.command_for("bugs/01_out_of_bounds") == \
        "curriculum artifacts --sanitize --only bugs/01_out_of_bounds"
    assert artifacts.kernel_id_of("kernels/bugs/artifacts/01_out_of_bounds.memcheck.txt") == \
        "bugs/01_out_of_bounds"



def test_an_artifact_block_shows_a_sanitizer_file(tmp_path):
    folder = tmp_path / "kernels" / "bugs" / "artifacts"
    folder.mkdir(parents=True)
    stamp = {"sanitizer": "Compute Sanitizer 2025.3", "nvcc": "13.0", "gpu": "NVIDIA H200",
             "date": "2026-12-03T08:00:00Z"}
    text = sanitize.header("bugs/01_out_of_bounds", "memcheck", stamp) + \
        "$ build/01_out_of_bounds\n========= Invalid __global__ write of size 4 bytes\n"
    (folder / "01_out_of_bounds.memcheck.txt").write_text(text)
    ex = artifacts.artifact_excerpt("path: kernels/bugs/artifacts/01_out_of_bounds.memcheck.txt\n"
                                    "grep: Invalid\n", tmp_path)
    assert ex.command == "curriculum artifacts --sanitize --only bugs/01_out_of_bounds"
    assert ex.lang == "text" and "Invalid __global__ write" in ex.code
    assert "Compute Sanitizer" in ex.provenance


def test_without_the_tools_it_exits_2_and_says_which(monkeypatch, capsys):
    monkeypatch.setattr(sanitize, "tool_path", lambda name: None)
    assert artifacts.run(ROOT, None, None, sanitize=True) == 2
    err = capsys.readouterr().err
    assert "nvcc" in err and "compute-sanitizer" in err and "not found" in err


def test_clean_makes_paths_relative_and_trim_cuts_the_middle(tmp_path):
    build = tmp_path / "b"
    text = f"at {ROOT}/kernels/bugs/01_out_of_bounds.cu:17\nrun {build}/01_out_of_bounds\n" \
           "[New Thread 0x7f (LWP 12)]\n"
    out = sanitize.clean(text, ROOT, build)
    assert out == "at kernels/bugs/01_out_of_bounds.cu:17\nrun build/01_out_of_bounds\n"
    long = "\n".join(str(i) for i in range(200)) + "\n"
    cut = sanitize.trim(long, 5, 2)
    assert cut.splitlines()[:5] == ["0", "1", "2", "3", "4"] and "193 lines" in cut
    assert cut.splitlines()[-1] == "199"


def test_fp4_and_fp8_grids():
    import numpy as np

    got = e2m1(np.array([0.2, 0.3, 0.76, 1.25, 2.5, 3.5, 5.0, 5.1, 7.0, -2.6]))
    assert got.tolist() == [0.0, 0.5, 1.0, 1.0, 2.0, 4.0, 4.0, 6.0, 6.0, -3.0]
    assert e4m3(np.array([500.0, 250.0, 1.07, 2.0 ** -9])).tolist() == [448.0, 256.0, 1.125, 2.0 ** -9]


def test_microscaled_formats_keep_block_maxima_and_rank_as_expected():
    import numpy as np

    w = np.random.default_rng(1).standard_normal((64, 64))
    for q in (nvfp4(w), mxfp4(w)):
        assert q.shape == w.shape and np.isfinite(q).all()
    rows = errors(seed=3, shape=(256, 256))
    err = {(r["matrix"][:5], r["format"].split(" ")[0]): r["rel_err_w"] for r in rows}
    assert err[("gauss", "BF16")] < err[("gauss", "FP8")] < err[("gauss", "NVFP4")]
    assert err[("heavy", "NVFP4")] < err[("heavy", "MXFP4")] < err[("heavy", "INT4,")]


def test_quant_error_artifact_is_committed():
    text = (ROOT / "kernels" / "microscaling" / "artifacts" / "01_quant_error.txt").read_text()
    assert "NVFP4" in text and "MXFP4" in text and "curriculum artifacts --quant-error" in text


def test_a_tool_that_hangs_or_prints_bytes_is_contained(tmp_path):
    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\nsleep 30 &\nprintf 'started\\n'\nwait\n")
    hang.chmod(0o755)
    rc, out = sanitize._exec([str(hang)], tmp_path, timeout=1)
    assert rc == 124 and "started" in out and "stopped after 1 s" in out
    noise = tmp_path / "noise.sh"
    noise.write_text("#!/bin/sh\nprintf '\\377\\376 ok\\n'\nexit 3\n")
    noise.chmod(0o755)
    assert sanitize._exec([str(noise)], tmp_path) == (3, "\ufffd\ufffd ok\n")
    assert sanitize._exec([str(tmp_path / "absent")], tmp_path)[0] == 127


def test_the_expected_report_is_looked_for_in_the_tools_output_only():
    text = ("// bugs/05_misaligned_vector_load: ...\n$ build/05_misaligned_vector_load\n"
            "sum4: misaligned address\n(exit status 0)\n\n"
            "$ compute-sanitizer --tool memcheck --show-backtrace device build/05_x\n"
            "========= ERROR SUMMARY: 0 errors\n")
    want = sanitize.EXPECTED["bugs/05_misaligned_vector_load"]
    assert re.search(want, text) and not re.search(want, sanitize.tool_section(text))
    assert sanitize.tool_section("no tool here") == ""


def test_summarise_takes_the_first_report_and_the_summaries():
    out = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ write of size 4 bytes\n"
           "=========     at ramp+0x70 in kernels/bugs/programs/01_out_of_bounds.cu:18\n"
           "========= ERROR SUMMARY: 24 errors\n")
    first, summary = sanitize.summarise(out)
    assert first == "========= Invalid __global__ write of size 4 bytes"
    assert summary == ["========= ERROR SUMMARY: 24 errors"]
    assert sanitize.summarise("========= COMPUTE-SANITIZER\n")[0] == "(no report)"


def test_the_breakpoint_session_stops_on_the_faulting_load():
    commands = sanitize.gdb_commands(ROOT, sanitize.GDB_TARGET, breakpoint=True)
    src = sanitize.source_of(ROOT, sanitize.GDB_TARGET).read_text().splitlines()
    at = next(c for c in commands if c.startswith("break "))
    line = int(at.rsplit(":", 1)[1])
    assert "reinterpret_cast<const float4*>(x)[i]" in src[line - 1]
    assert commands.index("run") > commands.index(at) and "next" in commands
    assert sanitize.gdb_commands(ROOT, sanitize.GDB_TARGET, breakpoint=False) == \
        sanitize.GDB_COMMANDS


def test_every_capture_file_names_its_command():
    name = sanitize.artifact_name(sanitize.GDB_TARGET, "cuda-gdb-break")
    assert artifacts.kernel_id_of(f"kernels/bugs/artifacts/{name}") == sanitize.GDB_TARGET
    assert artifacts.kernel_id_of("kernels/bugs/artifacts/all_tools.txt") == "bugs/all_tools"
    assert artifacts.command_for("bugs/all_tools") == "curriculum artifacts --sanitize"


@needs_capture
def test_every_program_ran_under_every_tool_and_its_own_tool_reports_it():
    text = (BUGS / "artifacts" / sanitize.MATRIX_FILE).read_text()
    assert text.startswith("// bugs/all_tools: ")
    for kernel_id, own in sanitize.BUGS:
        stem = kernel_id.split("/")[1]
        for tool in sanitize.SANITIZER_TOOLS:
            row = re.search(rf"^{stem}\s+{tool}\s+-?\d+\s+(.*)$", text, re.M)
            assert row, (stem, tool)
            if tool == own:
                assert row.group(1) != "(no report)", (stem, tool)
    assert not re.search(r"/(home|root|work|tmp)/", text)


@needs_capture
def test_cuda_gdb_stopped_at_the_breakpoint_then_at_the_fault():
    path = BUGS / "artifacts" / sanitize.artifact_name(sanitize.GDB_TARGET, "cuda-gdb-break")
    text = path.read_text()
    hit, fault = text.find("hit Breakpoint 1"), text.find("CUDA_EXCEPTION_6")
    assert 0 <= hit < fault  # stopped before the load, then the step faulted
    assert re.search(r"^\$3 = 4$", text, re.M)  # the address about to be loaded, modulo 16

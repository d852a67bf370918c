"""`curriculum artifacts`: trimming and parsing the tools' output, the no-tools refusal,
and the `artifact` / `ncu` blocks that show the committed files on a page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curriculum import artifacts
from curriculum.errors import Diagnostics
from curriculum.markdown import collect_refs, parse, render_tokens
from curriculum.validate import _body, _check_body

REPO = Path(__file__).resolve().parents[1]
SASS = "kernels/memory/artifacts/02_copy_vec4.sass"
PTX = "kernels/memory/artifacts/02_copy_vec4.ptx"
NCU_GEMM = "kernels/gemm/artifacts/05_blocktiling_2d.ncu.json"
NCU_ATTN = "kernels/attention/artifacts/04_split_kv.ncu.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project with the committed artifacts of two topics."""
    for rel in (SASS, PTX, NCU_GEMM, NCU_ATTN):
        dest = tmp_path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, dest)
    (tmp_path / "content").mkdir()
    return tmp_path


# --- the command's pieces ------------------------------------------------------------------


def test_entry_and_options() -> None:
    src = 'extern "C" __global__ void __launch_bounds__(THREADS, 1)\nk_entry(int* p) {}'
    assert artifacts.entry_of(src) == "k_entry"
    assert artifacts.nvcc_options(("--std=c++17", "-arch=sm_90", "-arch=sm_90a", "-DX=1")) == [
        "-std=c++17", "-DX=1", "-arch=sm_90a"]
    with pytest.raises(ValueError):
        artifacts.entry_of("__global__ void k() {}")


def test_trim_ptx_keeps_directives_and_the_entry() -> None:
    ptx = (".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry other(\n)\n{\n}\n"
           ".visible .entry mine(\n\t.param .u64 p\n)\n{\n\t// begin inline asm\n\t{\n\tfence;\n}\n"
           "\tld.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n\tret;\n\n}\n.func tail()\n{\n}\n")
    out = artifacts.trim_ptx(ptx, "mine")
    assert out.startswith(".version 9.0\n.target sm_90\n.address_size 64\n")
    assert ".entry mine(" in out and "other" not in out and ".func" not in out
    assert out.rstrip().endswith("}") and "\tret;" in out and "fence;" in out


def test_trim_sass_drops_encodings_flags_and_padding() -> None:
    sass = """
\tcode for sm_90
\t\tFunction : other
        /*0000*/   EXIT ;   /* 0x000000000000794d */
        .....................
\t\tFunction : mine
\t.headerflags\t@"EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;  /* 0x00000a00ff017b82 */
                                                           /* 0x000fe20000000800 */
        /*0010*/                   EXIT ;                  /* 0x000000000000794d */
                                                           /* 0x000fea0003800000 */
        /*0020*/                   BRA 0x20;               /* 0xfffffffc00fc7947 */
                                                           /* 0x000fc0000383ffff */
        /*0030*/                   NOP;                    /* 0x0000000000007918 */
                                                           /* 0x000fc00000000000 */
        .....................
"""
    assert artifacts.trim_sass(sass, "mine") == (
        "/*0000*/                   LDC R1, c[0x0][0x28] ;\n"
        "/*0010*/                   EXIT ;\n")
    with pytest.raises(ValueError):
        artifacts.trim_sass(sass, "absent")


def test_parse_raw_and_details() -> None:
    raw = ('==PROF== noise\n"ID","Kernel Name","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
           '"","","%"\n"0","k","37.35"\n')
    assert artifacts.parse_raw(raw) == [{
        "ID": {"value": 0.0, "unit": ""}, "Kernel Name": {"value": "k", "unit": ""},
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": {"value": 37.35, "unit": "%"}}]
    details = (
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value",'
        '"Rule Name","Rule Type"\n'
        '"0","k","GPU Speed Of Light Throughput","Duration","ms","6.29","",""\n'
        '"0","k","GPU Speed Of Light Throughput","","","","SOLBottleneck","OPT"\n'
        '"0","k","Occupancy","Block Limit Registers","block","1",,\n'
        '"0","k","Launch Statistics","Threads","thread","262,144","",""\n')
    (kernel,) = artifacts.parse_details(details)
    assert kernel["GPU Speed Of Light Throughput"] == {"Duration": {"value": 6.29, "unit": "ms"}}
    assert kernel["Occupancy"]["Block Limit Registers"]["value"] == 1.0
    assert kernel["Launch Statistics"]["Threads"]["value"] == 262144.0
    with pytest.raises(ValueError):
        artifacts.parse_details('"ID","Kernel Name"\n"0","k"\n')


def test_without_the_tools_it_says_so_and_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(artifacts.shutil, "which", lambda name: None)
    assert artifacts.main(["--root", str(REPO)]) == 2
    err = capsys.readouterr().err
    assert "nvcc, cuobjdump, ncu not found" in err


def test_committed_artifacts_carry_provenance() -> None:
    for kid in artifacts.DISASSEMBLE:
        for suffix in (".ptx", ".sass"):
            text = artifacts.artifact_path(REPO, kid, suffix).read_text(encoding="utf-8")
            head, n = artifacts._provenance_lines(text)
            assert n >= 2 and artifacts.command_for(kid) in head[0]
    for kid in artifacts.PROFILE:
        data = json.loads(artifacts.artifact_path(REPO, kid, ".ncu.json").read_text())
        assert data["kernel"] == kid and data["provenance"]["gpu"]
        assert "--clock-control none" in data["ncu_command"]
        assert data["provenance"]["check"].startswith("passed")
        assert "GPU Speed Of Light Throughput" in data["sections"]


# --- the blocks ----------------------------------------------------------------------------


def test_artifact_excerpt_by_grep_and_lines(root: Path) -> None:
    ex = artifacts.artifact_excerpt(f"path: {SASS}\ngrep: 'LDG|STG'\n", root)
    assert ex.code.count("\n") == 2 and "LDG.E.128" in ex.code and "STG.E.128" in ex.code
    assert ex.command == "curriculum artifacts --only memory/02_copy_vec4"
    assert ex.lang == "sass"
    whole = artifacts.artifact_excerpt(f"path: {PTX}\n", root)
    assert not whole.code.startswith("//")  # the provenance lines are the caption's
    some = artifacts.artifact_excerpt(f"path: {SASS}\nlines: 4-6\n", root)
    assert (some.first, some.last) == (4, 6) and some.code.count("\n") == 3


@pytest.mark.parametrize(("text", "code"), [
    ("path: kernels/memory/artifacts/nope.sass\n", "artifact.missing"),
    ("path: ../outside.txt\n", "asset.escape"),
    ("path: /etc/passwd\n", "asset.absolute"),
    (f"path: {SASS}\nlines: 3-900\n", "artifact.lines"),
    (f"path: {SASS}\ngrep: WGMMA\n", "artifact.grep"),
    (f"path: {SASS}\nline: 3\n", "artifact.syntax"),
    ("- just a list\n", "artifact.syntax"),
])
def test_artifact_block_problems(root: Path, text: str, code: str) -> None:
    assert [p.code for p in artifacts.check_block("artifact", text, root)] == [code]


def test_ncu_table_two_files(root: Path) -> None:
    text = (f"files:\n- {NCU_GEMM}\n- {NCU_ATTN}\nmetrics:\n"
            "- GPU Speed Of Light Throughput / Compute (SM) Throughput\n"
            "- metric: smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio\n"
            "  label: long scoreboard\n  unit: cycles per issue\n")
    table = artifacts.ncu_table(text, root)
    assert table.columns[0].startswith("gemm/05_blocktiling_2d (m=4096")
    assert [label for label, _ in table.rows] == ["Compute (SM) Throughput", "long scoreboard"]
    assert all(len(cells) == 2 for _, cells in table.rows)
    assert table.rows[0][1][0].endswith("%")
    assert table.rows[1][1][1].endswith("cycles per issue")
    assert "NVIDIA H200" in table.provenance[0]


def test_ncu_unknown_metric_is_reported_at_its_line(root: Path) -> None:
    text = (f"file: {NCU_GEMM}\nmetrics:\n- GPU Speed Of Light Throughput / Duration\n"
            "- Occupancy / Achieved Ocupancy\n")
    (problem,) = artifacts.check_block("ncu", text, root)
    assert problem.code == "ncu.unknown-metric" and problem.line == 3
    assert problem.hint == "did you mean 'Occupancy / Achieved Occupancy'?"


def test_format_value() -> None:
    assert artifacts.format_value(619193344.0, "byte") == "619,193,344 byte"
    assert artifacts.format_value(12.5, "%") == "12.5%"
    assert artifacts.format_value(5.23, "cycle") == "5.23 cycle"
    assert artifacts.format_value("PolicySpread", "") == "PolicySpread"


# --- through the page pipeline ---------------------------------------------------------------


PAGE = f"""Some text.

```artifact
path: {SASS}
grep: LDG
```

```ncu
file: {NCU_ATTN}
metrics:
- Occupancy / Achieved Occupancy
- Occupancy / No Such Metric
```
"""


def test_blocks_are_refs_not_code(root: Path) -> None:
    refs = collect_refs(parse(PAGE))
    assert [(k, line) for k, _, line in refs.artifacts] == [("artifact", 2), ("ncu", 7)]
    assert refs.code_langs == []


def test_check_reports_file_and_line(root: Path) -> None:
    body = _body(PAGE, "content/x.md", 10)
    diags = Diagnostics()
    _check_body(body, root, {"capsule": set(), "question": set(), "experiment": set()}, diags)
    found = [(d.code, str(d.loc)) for d in diags.errors]
    # the body starts at line 10; the ncu fence is its line 7, the bad metric 4 lines below
    assert found == [("ncu.unknown-metric", "content/x.md:21:1")]


def test_render_block_html(root: Path) -> None:
    html = artifacts.render_block("artifact", f"path: {SASS}\ngrep: LDG\n", root)
    assert html.startswith('<figure class="artifact">') and "LDG" in html
    assert "<code>curriculum artifacts --only memory/02_copy_vec4</code>" in html
    table = artifacts.render_block(
        "ncu", f"file: {NCU_ATTN}\nmetrics: [Occupancy / Achieved Occupancy]\n", root)
    assert '<figure class="ncu"><table>' in table and "Achieved Occupancy" in table
    seen = []
    env = {"link": str, "image": str, "figure": str, "chart": str,
           "artifact": lambda kind, text, line: seen.append((kind, line)) or "<X>"}
    out = render_tokens(parse(PAGE), env)
    assert seen == [("artifact", 2), ("ncu", 7)] and out.count("<X>") == 2


def test_cli_subcommand_refuses_without_tools(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from curriculum.cli import main

    monkeypatch.setattr(artifacts.shutil, "which", lambda name: None)
    assert main(["--root", str(REPO), "artifacts", "--only", "memory/*"]) == 2
    assert "not found on the PATH" in capsys.readouterr().err

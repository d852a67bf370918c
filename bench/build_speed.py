"""Build-speed benchmark: `curriculum build` against `mkdocs build` on one corpus.

The script writes a synthetic corpus (seeded, so every run sees the same text)
twice: once as a curriculum project with one course of N capsules, once as a
plain mkdocs project holding the same Markdown bodies. It then times cold
builds of each tool in fresh subprocesses, counts the HTML pages each wrote,
and reports wall time, pages per second and the ratio of the two rates.

    python bench/build_speed.py                      # 1,000 capsules, 5 runs each
    python bench/build_speed.py --capsules 200 --runs 3 --json results.json
    python bench/build_speed.py --keep /tmp/corpus   # keep the corpus and the sites

It installs nothing: mkdocs and pymdown-extensions must already be importable
by the Python that runs it (see bench/README.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "templates"
COURSE = "bench"
EDITIONS = ("public", "member")
PART_SIZE = 50
SEED = 20240611

# --- vocabulary ------------------------------------------------------------------------
# Word pools for the prose generator. Sentences draw most of their words at
# random from these, so any run of eight words is very unlikely to repeat
# between pages (the build's leak check compares such runs across tiers).

NOUNS = ["kernel", "warp", "block", "thread", "tile", "register", "bank", "buffer", "tensor", "matrix", "vector", "row", "column", "stride", "launch", "grid", "occupancy", "latency", "throughput", "bandwidth", "pipeline", "stage", "barrier", "fence", "load", "store", "transaction", "sector", "segment", "queue", "stream", "event", "profile", "trace", "counter", "roofline", "ceiling", "benchmark", "baseline", "reference", "epilogue", "prologue", "accumulator", "fragment", "operand", "layout", "swizzle", "copy", "reduction", "scan", "softmax", "norm", "attention", "head", "sequence", "batch", "token", "weight", "activation", "gradient", "scale", "exponent", "mantissa", "precision", "rounding", "error", "tolerance", "seed", "input", "output", "shape", "dimension", "axis", "loop", "unroll", "predicate", "branch", "divergence", "mask", "shuffle", "vote", "atomic", "lock", "allocation", "arena", "heap", "pointer", "alignment", "padding", "footprint", "residency", "eviction", "prefetch", "hint", "instruction", "opcode", "scheduler", "dispatch", "cycle", "clock", "frequency", "power", "limit", "budget", "estimate", "measurement", "median", "variance", "outlier", "sample", "sweep", "chart", "figure", "result", "regression", "speedup", "slowdown", "bottleneck", "hotspot", "compiler", "flag", "intrinsic", "listing", "library", "routine", "handle", "context", "device", "host", "transfer", "link", "lane", "channel", "partition", "slice", "chunk", "window", "boundary", "halo", "edge", "corner", "cluster", "multiprocessor", "core", "unit", "port", "crossbar", "controller", "page", "mapping", "descriptor"]

ADJECTIVES = ["coalesced", "strided", "scattered", "aligned", "misaligned", "vectorized", "scalar", "shared", "global", "local", "constant", "texture", "pinned", "pageable", "persistent", "transient", "cold", "warm", "hot", "fused", "unfused", "tiled", "blocked", "naive", "tuned", "hand-written", "generated", "narrow", "wide", "deep", "shallow", "short", "long", "small", "large", "dense", "sparse", "regular", "irregular", "balanced", "skewed", "predictable", "noisy", "stable", "unstable", "exact", "approximate", "lossy", "careful", "sloppy", "cheap", "costly", "idle", "busy", "saturated", "starved", "partial", "complete", "early", "late", "first", "last", "inner", "outer", "upper", "lower", "leading", "trailing", "padded", "packed", "unpacked", "signed", "unsigned", "half", "single", "double", "mixed", "quantized", "rounded", "clamped", "masked"]

VERBS = ["reads", "writes", "loads", "stores", "moves", "copies", "fuses", "splits", "tiles", "unrolls", "hides", "exposes", "bounds", "limits", "caps", "raises", "lowers", "doubles", "halves", "saturates", "starves", "stalls", "overlaps", "serializes", "reorders", "schedules", "issues", "retires", "evicts", "prefetches", "spills", "reuses", "shares", "broadcasts", "reduces", "accumulates", "scales", "normalizes", "rounds", "clamps", "masks", "predicates", "shuffles", "packs", "unpacks", "aligns", "pads", "swizzles", "transposes", "gathers", "scatters", "checks", "measures", "times", "compares", "predicts", "explains", "bounds", "dominates", "follows", "precedes", "replaces", "removes", "adds", "costs", "saves"]

ADVERBS = ["quickly", "slowly", "cleanly", "roughly", "exactly", "nearly", "barely", "fully", "partly", "twice", "rarely", "often", "always", "never", "usually", "sometimes", "mostly", "locally", "globally", "early", "late", "eagerly", "lazily"]

PREPOSITIONS = ["across", "within", "through", "under", "over", "before", "after", "between", "beside", "behind", "against", "toward", "along", "per", "inside", "outside", "beyond", "near", "past", "despite", "without"]

DETERMINERS = ["the", "a", "each", "every", "this", "that", "one", "another", "any", "some", "its"]

OPENERS = [o.strip() + "," for o in """
However, Meanwhile, In practice, As a rule, By contrast, For a start, In short, Even so,
On paper, At scale, Put simply, Worse, Better still, Here
""".replace("\n", " ").split(",")]

CONNECTIVES = ["and", "but", "so", "while", "because", "although", "whereas", "until", "unless", "since"]

NUMBERS = ("2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "4096", "65536")


@dataclass
class Corpus:
    """What was generated, for the report."""

    capsules: int
    words: int = 0
    bytes: int = 0
    access: dict[str, int] = field(default_factory=dict)
    curriculum_root: Path | None = None
    mkdocs_root: Path | None = None


def plural(noun: str) -> str:
    if noun.endswith(("s", "x", "sh", "ch")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


# --- prose -----------------------------------------------------------------------------


class Prose:
    """A seeded generator of varied technical-sounding sentences."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def np(self) -> str:
        """A noun phrase."""
        r = self.rng
        parts = [r.choice(DETERMINERS)]
        if r.random() < 0.6:
            parts.append(r.choice(ADJECTIVES))
        if r.random() < 0.25:
            parts.append(r.choice(NOUNS))
        parts.append(r.choice(NOUNS))
        if r.random() < 0.2:
            parts.append(f"of {r.choice(NUMBERS)} {plural(r.choice(NOUNS))}")
        if parts[0] == "a" and parts[1][0] in "aeiou":
            parts[0] = "an"
        return " ".join(parts)

    def clause(self) -> str:
        r = self.rng
        words = [self.np(), r.choice(VERBS)]
        if r.random() < 0.3:
            words.insert(1, r.choice(ADVERBS))
        words.append(self.np())
        if r.random() < 0.5:
            words.append(f"{r.choice(PREPOSITIONS)} {self.np()}")
        return " ".join(words)

    def sentence(self) -> str:
        r = self.rng
        text = self.clause()
        if r.random() < 0.45:
            text += f", {r.choice(CONNECTIVES)} {self.clause()}"
        if r.random() < 0.2:
            text = f"{r.choice(OPENERS)} {text}"
        return text[0].upper() + text[1:] + r.choice(".....?!")

    def paragraph(self, sentences: int, extras: list[str] | None = None) -> str:
        out = [self.sentence() for _ in range(sentences)]
        for extra in extras or []:
            out.insert(self.rng.randrange(len(out) + 1), extra)
        return " ".join(out)

    def title(self) -> str:
        r = self.rng
        words = [r.choice(ADJECTIVES), r.choice(NOUNS)]
        if r.random() < 0.5:
            words += [r.choice(PREPOSITIONS), r.choice(NOUNS)]
        return " ".join(words).capitalize()


# --- the pieces a capsule holds -----------------------------------------------------------


def inline_math(rng: random.Random) -> str:
    a, b, k = rng.randint(2, 9), rng.randint(2, 64), rng.randint(3, 16)
    forms = [
        f"${a}n$",
        f"$2^{{{k}}}$",
        f"$\\frac{{{a}n}}{{{b}}}$",
        "$O(n \\log n)$",
        "$t = \\frac{B}{\\beta}$",
        f"$\\sqrt{{{a * b}}}$",
        f"$x_{{i}} \\cdot w_{{{k}}}$",
        f"$m \\times n = {a * b}$",
    ]
    return rng.choice(forms)


def display_math(rng: random.Random) -> str:
    a, b = rng.randint(2, 8), rng.randint(2, 32)
    forms = [
        f"T = \\frac{{{a} n \\cdot 4}}{{\\beta}} + t_0",
        f"\\sum_{{i=0}}^{{N-1}} a_i b_i = {b}",
        f"I = \\frac{{2 m n k}}{{{a} (m k + k n + m n)}}",
        "m_i = \\max(m_{i-1}, x_i), \\quad d_i = d_{i-1} e^{m_{i-1} - m_i} + e^{x_i - m_i}",
        f"\\text{{time}} \\ge \\max\\left(\\frac{{F}}{{P}}, \\frac{{Q}}{{{b} B}}\\right)",
    ]
    return "$$\n" + rng.choice(forms) + "\n$$"


def cuda_block(rng: random.Random, prose: Prose) -> str:
    name = f"{rng.choice(VERBS).removesuffix('s')}_{rng.choice(NOUNS)}_{rng.randint(1, 99)}"
    tile = rng.choice((16, 32, 64, 128))
    unroll = rng.choice((2, 4, 8))
    op = rng.choice(("+", "*", "-"))
    scale = f"{rng.uniform(0.1, 4):.3f}f"
    src = f"""\
        // {prose.title()}: {tile}-wide tiles, unrolled by {unroll}.
        __global__ void {name}(const float* __restrict__ x, float* __restrict__ y, int n) {{
          __shared__ float tile[{tile}];
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          float acc = 0.0f;
          #pragma unroll {unroll}
          for (int j = 0; j < {unroll}; ++j) {{
            int k = i * {unroll} + j;
            if (k < n) acc {op}= x[k] * {scale};
          }}
          tile[threadIdx.x % {tile}] = acc;
          __syncthreads();
          if (i < n) y[i] = tile[(threadIdx.x + 1) % {tile}] + acc;
        }}
        // launch: {name}<<<(n + {tile * 4 - 1}) / {tile * 4}, {tile * 4}>>>(x, y, n);
        """
    return "```cuda\n" + textwrap.dedent(src) + "```"


def table(rng: random.Random) -> str:
    # Headers and labels vary too: a fixed header would put the same run of
    # words in every page and trip the leak check on page text around it.
    cols = [rng.choice(("variant", "version", "kernel", "attempt", "layout", "schedule")),
            rng.choice(("bytes moved", "traffic", "data read", "footprint", "working set")),
            rng.choice(("estimate (ms)", "time (ms)", "guess (ms)", "budget (ms)")),
            rng.choice(("note", "remark", "limit", "why", "watch for"))]
    rows = ["| " + " | ".join(cols) + " |", "| --- | ---: | ---: | --- |"]
    for _ in range(rng.randint(3, 6)):
        mib = rng.choice((64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048))
        rows.append(f"| {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} | {mib} MiB | "
                    f"{rng.uniform(0.01, 9):.3f} | {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} |")
    return "\n".join(rows)


def capsule_body(rng: random.Random, prose: Prose, others: list[str], target_words: int
                 ) -> tuple[str, int]:
    """A capsule's Markdown (links as `capsule:id`) and its prose word count."""
    blocks: list[str] = []
    words = 0

    def para(n: int, extras: list[str] | None = None) -> None:
        nonlocal words
        text = prose.paragraph(n, extras)
        words += len(text.split())
        blocks.append(text)

    def link() -> str:
        return f"[{prose.title().lower()}](capsule:{rng.choice(others)})"

    para(rng.randint(4, 6), [f"The cost grows as {inline_math(rng)}."])
    blocks.append("<!-- more -->")
    headings = set()
    section = 0
    while words < target_words:
        section += 1
        heading = prose.title()
        while heading in headings:
            heading = prose.title()
        headings.add(heading)
        blocks.append(f"## {heading}")
        para(rng.randint(3, 6), [f"Compare {link()}.", f"Here {inline_math(rng)} holds."])
        if section == 1:
            blocks.append(table(rng))
            para(rng.randint(2, 4))
        elif section == 2:
            blocks.append(cuda_block(rng, prose))
            para(rng.randint(2, 4), [f"See also {link()}."])
        elif section == 3:
            blocks.append(display_math(rng))
            para(rng.randint(2, 4))
        elif section == 4:
            note = prose.sentence()
            words += len(note.split())
            blocks.append(f'!!! note "{prose.title()}"\n    {note}')
        else:
            para(rng.randint(2, 5), [f"The next step is {link()}."])
    return "\n\n".join(blocks) + "\n", words


# --- writing the two projects ----------------------------------------------------------------

SITE_YAML = """\
title: Build Bench
tagline: A synthetic course for timing the build.
description: One course of generated capsules; nothing here is meant to be read.
base_url: https://bench.example.org/
tiers:
  - id: free
    label: Free
    description: Anyone.
  - id: account
    label: Account
    description: Anyone signed in.
    offer:
      gives: The account capsules; nothing to pay.
      price: Free with an account
      join_label: Create an account
      join_url: https://bench.example.org/join/
      sign_in_url: https://bench.example.org/sign-in/
  - id: premium
    label: Members
    description: Paying members.
    offer:
      gives: Every capsule in full.
      price: Paid membership
      join_label: Become a member
      join_url: https://bench.example.org/members/
      sign_in_url: https://bench.example.org/sign-in/
editions:
  - id: public
    max_tier: free
    description: Public edition
  - id: member
    max_tier: premium
    description: Member edition
primary_gpu: bench-gpu
courses: [{course}]
upgrade_text: Members read every capsule in full.
"""


def _yaml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def generate(root: Path, capsules: int, words_per_capsule: int = 800, seed: int = SEED) -> Corpus:
    """Write `root/curriculum` and `root/mkdocs` holding the same bodies."""
    rng = random.Random(seed)
    prose = Prose(rng)
    corpus = Corpus(capsules)

    # Ids: unique, varied, stable for a seed.
    ids: list[str] = []
    seen: set[str] = set()
    for n in range(capsules):
        cid = f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}-{n + 1:04d}"
        assert cid not in seen
        seen.add(cid)
        ids.append(cid)

    cur = root / "curriculum"
    mk = root / "mkdocs"
    cap_dir = cur / "content" / "courses" / COURSE / "capsules"
    cap_dir.mkdir(parents=True)
    docs = mk / "docs"
    (docs / COURSE).mkdir(parents=True)
    (cur / "content" / "site.yaml").write_text(SITE_YAML.format(course=COURSE), encoding="utf-8")

    parts = []
    for p, start in enumerate(range(0, capsules, PART_SIZE)):
        members = ids[start:start + PART_SIZE]
        parts.append(
            f"  - id: part-{p + 1:02d}\n"
            f"    title: {_yaml_str(prose.title())}\n"
            f"    summary: {_yaml_str(prose.sentence())}\n"
            f"    capsules: [{', '.join(members)}]\n")
    (cur / "content" / "courses" / COURSE / "course.yaml").write_text(
        f"id: {COURSE}\ntitle: Synthetic kernels\nsubtitle: {capsules} generated capsules.\n"
        f"description: {_yaml_str(prose.paragraph(2))}\nlevel: intermediate\n"
        f"authors: [Bench Author]\nparts:\n" + "".join(parts), encoding="utf-8")

    kinds = ("concept", "lab", "practice")
    for n, cid in enumerate(ids):
        roll = rng.random()
        access = "free" if roll < 0.45 else ("account" if roll < 0.55 else "premium")
        corpus.access[access] = corpus.access.get(access, 0) + 1
        title = prose.title()
        summary = prose.sentence()
        tag = rng.choice(NOUNS).upper().replace("-", "")[:12]
        prereqs = sorted(set(rng.sample(ids[:n], min(n, rng.randint(0, 2)))))
        others = [o for o in rng.sample(ids, min(len(ids), 8)) if o != cid] or [cid]
        body, words = capsule_body(rng, prose, others, words_per_capsule)
        corpus.words += words
        front = [
            f"title: {_yaml_str(title)}",
            f"tag: {tag}",
            f"access: {access}",
            f"kind: {rng.choice(kinds)}",
            f"summary: {_yaml_str(summary)}",
        ]
        if prereqs:
            front.append(f"prerequisites: [{', '.join(prereqs)}]")
        if rng.random() < 0.3:
            front.append("checks:\n"
                         f"  - task: {_yaml_str(prose.sentence())}\n"
                         f"    redo_if: {_yaml_str(prose.sentence())}")
        head = "---\n" + "\n".join(front) + "\n---\n"
        text = head + body
        (cap_dir / f"{cid}.md").write_text(text, encoding="utf-8")
        corpus.bytes += len(text.encode("utf-8"))
        # mkdocs: same front matter (read as page meta), links to sibling .md files.
        mk_body = body.replace("](capsule:", "](")
        for other in set(others):
            mk_body = mk_body.replace(f"]({other})", f"]({other}.md)")
        (docs / COURSE / f"{cid}.md").write_text(head + mk_body, encoding="utf-8")

    (docs / "index.md").write_text("# Build Bench\n\nOne course of generated capsules.\n",
                                   encoding="utf-8")
    (mk / "mkdocs.yml").write_text(
        "site_name: Build Bench\n"
        "site_url: https://bench.example.org/\n"
        "theme:\n  name: mkdocs\n"
        "markdown_extensions:\n"
        "  - tables\n  - footnotes\n  - def_list\n  - admonition\n  - toc\n"
        "  - pymdownx.arithmatex\n  - pymdownx.highlight\n  - pymdownx.superfences\n",
        encoding="utf-8")
    corpus.curriculum_root = cur
    corpus.mkdocs_root = mk
    return corpus


# --- timing ----------------------------------------------------------------------------------


def count_html(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.html")) if folder.is_dir() else 0


def tree_pids(pid: int) -> set[int]:
    """`pid` and every process under it, from each thread's list of children in /proc (a
    few small reads), or by reading every process's parent where the kernel keeps no such
    list."""
    tree, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except FileNotFoundError:
                return _tree_from_parents(pid)  # a kernel without the children lists
            except OSError:
                continue
            for kid in kids:
                if kid not in tree:
                    tree.add(kid)
                    todo.append(kid)
    return tree


def _tree_from_parents(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else []:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    tree = {pid}
    grew = True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree and p not in tree}
        tree |= more
        grew = bool(more)
    return tree


def tree_memory(pid: int, proportional: bool = True) -> tuple[int, int]:
    """Resident and proportional-set bytes of `pid` and every process under it, summed
    (from /proc; zeros elsewhere). The resident sum counts a page shared by a forked
    worker and its parent twice; the proportional sum (PSS) splits it between them.
    PSS is read only if `proportional` (0 otherwise): the kernel walks a process's page
    tables for it, about 12 ms for a build's tree of gigabyte processes."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    rss = pss = 0
    for p in tree_pids(pid) if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
            rss += int(stat[stat.rindex(b")") + 2:].split()[21]) * page
            if proportional:
                with open(f"/proc/{p}/smaps_rollup", "rb") as f:
                    for line in f:
                        if line.startswith(b"Pss:"):
                            pss += int(line.split()[1]) * 1024
                            break
        except (OSError, ValueError, IndexError):
            continue
    return rss, pss


# The sampler runs beside the build it measures, on the same cores: resident memory every
# 50 ms (about 0.2 ms a sample), proportional memory every 0.5 s. Reading PSS every 50 ms
# took about a fifth of a core, which a build using both cores lost and mkdocs, using one,
# did not.
SAMPLE_EVERY = 0.05
PSS_EVERY = 10  # samples


def timed(cmd: list[str], cwd: Path, out: Path, env: dict[str, str] | None = None
          ) -> tuple[float, float, tuple[int, int]]:
    """Run `cmd` once, writing `out` (deleted first if it exists); return (wall seconds,
    child CPU seconds, the peaks of the process tree's resident and proportional-set bytes,
    sampled every 50 ms and every 0.5 s)."""
    if out.exists():
        shutil.rmtree(out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    peak = (0, 0)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        n = 0
        while not done.is_set():
            rss, pss = tree_memory(proc.pid, proportional=n % PSS_EVERY == 0)
            peak = (max(peak[0], rss), max(peak[1], pss))
            n += 1
            done.wait(SAMPLE_EVERY)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(stdout[-4000:] + stderr[-4000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak


def summarize(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
            "all": [round(w, 3) for w in walls],
            "cpu_median": statistics.median(cpus)}


# Where each run writes. By default every run gets a folder of its own and none is deleted
# until the series ends: on a disk that will not soon reuse a freed inode (ext4 without a
# journal skips every inode freed in the last minute, one by one, for each file it makes),
# deleting the last run's output just before a build charges that build, for each file it
# makes, a walk past the thousands just freed (see bench/README.md). `--replace-output`
# deletes it just before each run instead, as a rebuild over an existing site does.


def output_folder(work: Path, tool: str, run: int, replace: bool) -> Path:
    return work / (f"site-{tool}" if replace else f"site-{tool}-{run + 1}")


def run_bench(corpus: Corpus, runs: int, work: Path, templates: Path,
              with_mkdocs: bool = True, replace_output: bool = False,
              empty_cache: bool = False) -> dict[str, Any]:
    assert corpus.curriculum_root is not None and corpus.mkdocs_root is not None
    py = sys.executable
    base = [py, "-m", "curriculum", "--root", str(corpus.curriculum_root),
            "--templates", str(templates)]
    commands = {"curriculum": [*base, "build", "--out"],
                "mkdocs": [py, "-m", "mkdocs", "build", "-q", "-d"]}
    cache = corpus.curriculum_root / ".cache"

    # Validate once (untimed) so a broken corpus fails with a clear message.
    check = subprocess.run([*base, "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, check=False)
    if check.returncode != 0:
        sys.stderr.write(check.stdout[-6000:])
        raise SystemExit("the generated corpus does not pass `curriculum check`")

    sources = corpus.capsules  # Markdown files each tool reads (plus mkdocs' index.md)
    walls: dict[str, list[float]] = {"curriculum": [], "mkdocs": []}
    cpus: dict[str, list[float]] = {"curriculum": [], "mkdocs": []}
    peaks: dict[str, list[tuple[int, int]]] = {"curriculum": [], "mkdocs": []}
    tools = [("curriculum", corpus.curriculum_root)]
    if with_mkdocs:
        tools.append(("mkdocs", corpus.mkdocs_root))
    outs: dict[str, list[Path]] = {"curriculum": [], "mkdocs": []}
    for r in range(runs):  # interleave the tools so drift hits both alike
        said = []
        for name, cwd in tools:
            out = output_folder(work, name, r, replace_output)
            if name == "curriculum" and empty_cache and cache.exists():
                shutil.rmtree(cache)
            w, c, peak = timed([*commands[name], str(out)], cwd, out)
            outs[name].append(out)
            walls[name].append(w)
            cpus[name].append(c)
            peaks[name].append(peak)
            said.append(f"{name} {w:.2f} s (peak RSS {peak[0] / 2**20:,.0f} MiB, "
                        f"PSS {peak[1] / 2**20:,.0f} MiB)")
        print(f"  run {r + 1}/{runs}: {', '.join(said)}", file=sys.stderr)

    cur_out = outs["curriculum"][-1]
    pages = {e: count_html(cur_out / e) for e in EDITIONS}
    pages_total = sum(pages.values())
    cur = summarize(walls["curriculum"], cpus["curriculum"])
    res: dict[str, Any] = {
        "source_pages": sources,
        "outputs": ("each run's output deleted just before the next run" if replace_output
                    else "a new folder for each run, none deleted until the series ends"),
        "curriculum_cache": ("emptied before each run" if empty_cache
                             else "kept between runs (the first run starts without one)"),
        "curriculum": {
            "command": [*commands["curriculum"], str(cur_out)], **cur,
            "peak_rss_bytes": max(p[0] for p in peaks["curriculum"]),
            "peak_pss_bytes": max(p[1] for p in peaks["curriculum"]),
            "html_pages": {**pages, "total": pages_total},
            "s_per_source_page": cur["median"] / sources,
            "pages_per_s": {"both_editions": pages_total / cur["median"],
                            "one_edition": pages["member"] / cur["median"]},
        },
    }
    if with_mkdocs:
        mk = summarize(walls["mkdocs"], cpus["mkdocs"])
        mk_out = outs["mkdocs"][-1]
        mk_pages = count_html(mk_out)
        res["mkdocs"] = {"command": [*commands["mkdocs"], str(mk_out)], **mk,
                         "peak_rss_bytes": max(p[0] for p in peaks["mkdocs"]),
                         "peak_pss_bytes": max(p[1] for p in peaks["mkdocs"]),
                         "html_pages": mk_pages, "s_per_source_page": mk["median"] / sources,
                         "pages_per_s": mk_pages / mk["median"]}
        res["ratio"] = {
            "per_source_page": mk["median"] / cur["median"],
            "per_source_page_is": "mkdocs seconds per source page divided by curriculum "
                                  "seconds per source page (both editions in one build): "
                                  "how many times faster curriculum turns a source into a site",
            "per_source_page_cpu": mk["cpu_median"] / cur["cpu_median"],
            "headline_pages": (pages_total / cur["median"]) / (mk_pages / mk["median"]),
        }
    for made in outs.values():  # the last run's sites stay (`--keep`), the others go
        for out in set(made[:-1]) - {made[-1]}:
            shutil.rmtree(out, ignore_errors=True)
    return res


def _tool_version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "?"


def _module_file() -> str:
    """Where the curriculum the subprocesses import lives (PYTHONPATH can pin a snapshot)."""
    out = subprocess.run([sys.executable, "-c", "import curriculum; print(curriculum.__file__)"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


def render_table(res: dict[str, Any]) -> str:
    c = res["curriculum"]
    p = c["html_pages"]
    mib = 2**20
    lines = [
        f"corpus: {res['corpus']['capsules']} capsules, {res['corpus']['prose_words']:,} prose "
        f"words, access {res['corpus']['access']}; {res['runs']} cold runs each; "
        f"{res['cpus']} CPUs, 1-min load {res['load_average_1m']['start']:.1f} at start, "
        f"{res['load_average_1m']['end']:.1f} at end",
        f"outputs: {res['outputs']}; curriculum's cache: {res['curriculum_cache']}",
        "",
        f"{'tool':<28}{'pages':>8}{'median s':>10}{'min s':>8}{'max s':>8}{'cpu s':>8}"
        f"{'ms/source':>11}{'RSS MiB':>9}{'PSS MiB':>9}",
        f"{'curriculum (both editions)':<28}{p['total']:>8}{c['median']:>10.2f}{c['min']:>8.2f}"
        f"{c['max']:>8.2f}{c['cpu_median']:>8.2f}{1000 * c['s_per_source_page']:>11.2f}"
        f"{c['peak_rss_bytes'] / mib:>9,.0f}{c['peak_pss_bytes'] / mib:>9,.0f}",
    ]
    if "mkdocs" in res:
        m, r = res["mkdocs"], res["ratio"]
        lines += [
            f"{'mkdocs':<28}{m['html_pages']:>8}{m['median']:>10.2f}{m['min']:>8.2f}"
            f"{m['max']:>8.2f}{m['cpu_median']:>8.2f}{1000 * m['s_per_source_page']:>11.2f}"
            f"{m['peak_rss_bytes'] / mib:>9,.0f}{m['peak_pss_bytes'] / mib:>9,.0f}",
            "",
            f"per source page, wall time: curriculum {r['per_source_page']:.2f}x mkdocs",
            f"per source page, child CPU time: {r['per_source_page_cpu']:.2f}x",
            f"(HTML pages written per second, both editions counted: {r['headline_pages']:.2f}x)",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capsules", type=int, default=1000, help="capsules to generate (1000)")
    ap.add_argument("--runs", type=int, default=5, help="cold builds per tool; median (5)")
    ap.add_argument("--words", type=int, default=800, help="prose words per capsule (800)")
    ap.add_argument("--seed", type=int, default=SEED, help=f"corpus seed ({SEED})")
    ap.add_argument("--templates", type=Path, default=TEMPLATES,
                    help="curriculum templates folder (default: the repository's templates/)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="write the corpus and sites here and keep them (must not exist)")
    ap.add_argument("--json", type=Path, default=None,
                    help="write JSON results to FILE (default: after the table, on stdout)")
    ap.add_argument("--no-mkdocs", action="store_true",
                    help="time curriculum alone (a large corpus, when mkdocs was timed before)")
    ap.add_argument("--replace-output", action="store_true",
                    help="delete each tool's last output just before its next run, instead "
                         "of a new folder for every run")
    ap.add_argument("--empty-cache", action="store_true",
                    help="remove the curriculum project's .cache/ before each of its runs "
                         "(highlighted code, MathML and compiled templates made again)")
    args = ap.parse_args(argv)
    if args.capsules < 2 or args.runs < 1:
        ap.error("need --capsules >= 2 and --runs >= 1")
    for mod in () if args.no_mkdocs else ("mkdocs", "pymdownx"):
        try:
            __import__(mod)
        except ImportError:
            ap.error(f"'{mod}' is not installed here: pip install mkdocs pymdown-extensions")

    if args.keep is not None:
        if args.keep.exists():
            ap.error(f"{args.keep} exists; pass a new folder to --keep")
        args.keep.mkdir(parents=True)
        work = args.keep.resolve()
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="build-speed-")
        work = Path(tmp.name)
    load_start = os.getloadavg()[0]
    try:
        started = time.perf_counter()
        corpus = generate(work, args.capsules, args.words, args.seed)
        print(f"generated {args.capsules} capsules in {time.perf_counter() - started:.1f} s "
              f"under {work}", file=sys.stderr)
        res = run_bench(corpus, args.runs, work, args.templates.resolve(),
                        with_mkdocs=not args.no_mkdocs, replace_output=args.replace_output,
                        empty_cache=args.empty_cache)
    finally:
        if tmp is not None:
            tmp.cleanup()
    res = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": {"start": load_start, "end": os.getloadavg()[0]},
        "curriculum_module": _module_file(),
        "versions": {m: _tool_version(m) for m in
                     ("curriculum", "mkdocs", "pymdown-extensions", "markdown", "markdown-it-py")},
        "runs": args.runs,
        "corpus": {"capsules": corpus.capsules, "seed": args.seed,
                   "prose_words": corpus.words, "markdown_bytes": corpus.bytes,
                   "access": dict(sorted(corpus.access.items()))},
        **res,
    }
    print(render_table(res))
    text = json.dumps(res, indent=2)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

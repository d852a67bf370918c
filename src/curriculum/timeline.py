"""Pages read `curriculum trace` data: two chart kinds and one figure family.

The trace file is `kernels/<topic>/decode_step.json` (topic `traces`), written
on a GPU by `curriculum trace` (see `trace`). From it:

- chart `kind: timeline` draws one segment: a host row with the CUDA calls
  (launches, copies, waits) and one row per GPU stream with each kernel, copy
  or fill as a bar, the idle stretches of the GPU shaded, the step marks above;
  `window: [from, to]` (µs from the segment's start) zooms in;
- chart `kind: steps` draws the step time per batch, eager against graph replay,
  with the kernels and host enqueue calls of a step under each batch;
- `{fig:traces/SEGMENT.FIELD}` cites a segment's summary (e.g.
  `{fig:traces/eager_b1.busy_pct}`), and `{fig:traces/MODE.FIELD@batch=N}` a
  step's (e.g. `{fig:traces/graph.us@batch=64}`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curriculum import datafile
from curriculum.trace import TRACE_FILE, enqueue_calls, idle_intervals, summarize

TRACE_TOPIC = "traces"
TRACE_KINDS = ("timeline", "steps")

# Figure fields: how to format each, and what it is (for the provenance).
SEGMENT_FIELDS: dict[str, tuple[str, str]] = {
    "ops": ("count", "GPU activities (kernels, copies, fills)"),
    "kernels": ("count", "kernels"),
    "enqueue_calls": ("count", "host calls that enqueued GPU work"),
    "span_us": ("us", "first GPU start to last GPU end"),
    "busy_us": ("us", "time with at least one GPU activity running"),
    "idle_us": ("us", "time with no GPU activity inside the span"),
    "busy_pct": ("pct", "share of the span with the GPU busy"),
    "gaps": ("count", "idle stretches longer than 1 µs"),
    "largest_gap_us": ("us", "longest idle stretch"),
    "median_kernel_us": ("us", "median kernel duration"),
    "median_launch_delay_us": ("us", "median from the host launch call to the GPU start"),
    "copy_us": ("us", "duration of the first host-to-device copy"),
    "copy_gbps": ("gbps", "bytes of the first host-to-device copy over its duration"),
    "last_copy_us": ("us", "duration of the last host-to-device copy"),
    "last_copy_gbps": ("gbps", "bytes of the last host-to-device copy over its duration"),
    "syncs": ("count", "host calls that waited for a stream (cudaStreamSynchronize)"),
    "host_wait_us": ("us", "host time spent in cudaStreamSynchronize"),
    "gemm_us": ("us", "summed duration of the matrix-multiply kernels"),
    "attention_us": ("us", "summed duration of the attention kernels"),
    "other_us": ("us", "summed duration of every other GPU activity (elementwise, reductions, "
                 "copies, fills)"),
}
STEP_FIELDS: dict[str, tuple[str, str]] = {
    "us": ("us", "step time, CUDA events, median"),
    "per_token_us": ("us", "step time over the batch"),
    "us_per_op": ("us", "step time over the GPU activities of one step"),
    "speedup": ("x", "eager step time over graph step time"),
    "gpu_ops": ("count", "GPU activities of one step"),
    "kernels": ("count", "kernels of one step"),
    "enqueue_calls": ("count", "host calls that enqueued the step's GPU work"),
    "profiled_busy_us": ("us", "GPU busy time of one profiled step"),
}
COPY_BYTES = 64 << 20  # the copy segment moves 64 MiB each way (see trace)


def trace_path(root: Path, spec_topic: str = TRACE_TOPIC) -> Path:
    """The trace file under `root`, which is the project root or its kernels/ folder."""
    return datafile.find(root, spec_topic, TRACE_FILE)


def load(root: Path, topic: str = TRACE_TOPIC) -> dict[str, Any]:
    """The trace data; ValueError (a message with the fix) when there is none."""
    path = trace_path(root, topic)
    return datafile.read(path, f"trace data at {path}; run `curriculum trace` on a GPU")


def data_hash(root: Path | None, topic: str = TRACE_TOPIC) -> str:
    return datafile.digest(None if root is None else trace_path(root, topic))


def segment(data: dict[str, Any], key: str) -> dict[str, Any]:
    segs = data.get("segments", {})
    if key not in segs:
        raise ValueError(f"the trace has no segment {key!r} (segments: {', '.join(sorted(segs))})")
    seg = segs[key]
    if "error" in seg:
        raise ValueError(f"segment {key!r} failed when traced: {seg['error']}")
    return seg


def _copy(seg: dict[str, Any], names: list[str], last: bool) -> list[Any] | None:
    copies = [r for r in seg["gpu"] if r[1] == "m" and "HtoD" in names[r[0]]]
    return (copies[-1] if last else copies[0]) if copies else None


def segment_value(data: dict[str, Any], key: str, field: str) -> float | None:
    seg = segment(data, key)
    names = data["names"]
    if field == "enqueue_calls":
        return float(enqueue_calls(seg["host"], names))
    if field.endswith(("copy_us", "copy_gbps")):
        copy = _copy(seg, names, field.startswith("last_"))
        if copy is None or copy[4] <= 0:
            return None
        return copy[4] if field.endswith("_us") else COPY_BYTES / (copy[4] * 1e-6) / 1e9
    if field in ("syncs", "host_wait_us"):
        waits = [h for h in seg["host"] if names[h[0]] == "cudaStreamSynchronize"]
        return float(len(waits)) if field == "syncs" else float(sum(h[2] for h in waits))
    if field in ("gemm_us", "attention_us", "other_us"):
        label = {"gemm_us": "matrix multiply", "attention_us": "attention"}.get(field)
        cats = [(category(names[r[0]], r[1]), r[4]) for r in seg["gpu"]]
        if label is None:
            return float(sum(d for c, d in cats if c not in ("matrix multiply", "attention")))
        return float(sum(d for c, d in cats if c == label))
    s = summarize(seg["gpu"])
    value = s.busy_pct if field == "busy_pct" else getattr(s, field)
    return None if value is None else float(value)


def step_value(data: dict[str, Any], mode: str, batch: str, field: str) -> float | None:
    row = data.get("steps", {}).get(batch, {})
    if mode not in row:
        raise ValueError(f"the trace has no {mode} step at batch {batch} "
                         f"(batches: {', '.join(sorted(data.get('steps', {}), key=int))})")
    if field == "us":
        return float(row[mode]["median_us"])
    if field == "per_token_us":
        return float(row[mode]["median_us"]) / int(batch)
    if field == "us_per_op":
        ops = row[mode].get("gpu_ops")
        return float(row[mode]["median_us"]) / ops if ops else None
    if field == "speedup":
        return float(row["eager"]["median_us"]) / float(row["graph"]["median_us"])
    value = row[mode].get(field)
    return None if value is None else float(value)


def format_number(kind: str, v: float) -> str:
    if kind == "count":
        return f"{v:,.0f}"
    if kind == "us":
        return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:,.3g} µs" if v < 10 else f"{v:,.0f} µs"
    if kind == "pct":
        return f"{v:.0f}%"
    if kind == "gbps":
        return f"{v:,.1f} GB/s"
    if kind == "x":
        return f"{v:.1f}×"
    return f"{v:g}"


def figure(root: Path, case_id: str, field: str,
           shape: str | None) -> tuple[str, float, str]:
    """(text, value, provenance) of `{fig:traces/...}`; ValueError says what is wrong."""
    key = case_id.split("/", 1)[1]
    data = load(root, case_id.split("/", 1)[0])
    prov = data.get("provenance", {})
    where = (f"{prov.get('gpu_name', 'unknown GPU')}, driver {prov.get('driver', '?')}, "
             f"torch {prov.get('torch', '?')}; traced {str(prov.get('date', '?'))[:10]} at "
             f"{str(prov.get('git_rev', '?'))[:10]} by `curriculum trace`")
    if key in ("eager", "graph"):
        if field not in STEP_FIELDS:
            raise ValueError(f"steps have no field {field!r}; one of: {', '.join(STEP_FIELDS)}")
        if not shape or not shape.startswith("batch="):
            raise ValueError(f"a step figure needs its batch: {{fig:{case_id}.{field}@batch=1}}")
        value = step_value(data, key, shape.split("=", 1)[1], field)
        kind, what = STEP_FIELDS[field]
        row = data["steps"][shape.split("=", 1)[1]][key]
        what += f" ({row['samples']} samples, p20 {row['p20_us']:.4g} µs, p80 {row['p80_us']:.4g} µs)"
        where = f"{key} decode step at {shape}: {what}; {where}"
    else:
        if field not in SEGMENT_FIELDS:
            raise ValueError(f"segments have no field {field!r}; one of: {', '.join(SEGMENT_FIELDS)}")
        value = segment_value(data, key, field)
        kind, what = SEGMENT_FIELDS[field]
        where = f"{segment(data, key)['title']}: {what}, one profiled run; {where}"
    if value is None:
        raise ValueError(f"{case_id} has no {field}")
    return format_number(kind, value), value, where


# --- drawing --------------------------------------------------------------------------------

CATEGORIES = (  # (label, colour, words in the lower-cased kernel name)
    ("matrix multiply", "#3b6ea8", ("gemm", "gemv", "nvjet", "cutlass", "xmma", "splitk", "cublas")),
    ("attention", "#7d62a8", ("sdpa", "flash", "fmha", "attention")),
    ("reduction", "#4f9a5b", ("reduce", "argmax", "norm")),
    ("copy", "#d9822b", ("memcpy", "copy")),
    ("fill", "#8c6d4f", ("memset",)),
    ("elementwise", "#9aa5b1", ()),
)
HOST_COLOURS = {"launch": "#6f7d8c", "copy": "#d9822b", "wait": "#b8483e"}


def category(name: str, kind: str) -> str:
    low = name.lower()
    if kind == "m":
        return "copy"
    if kind == "s":
        return "fill"
    for label, _, words in CATEGORIES:
        if any(w in low for w in words):
            return label
    return "elementwise"


def _host_kind(name: str) -> str:
    if "Synchronize" in name:
        return "wait"
    if "Memcpy" in name:
        return "copy"
    return "launch"


def draw_timeline(ax: Any, data: dict[str, Any], key: str,
                  window: tuple[float, float] | None) -> None:
    seg = segment(data, key)
    names = data["names"]
    gpu, host, marks = seg["gpu"], seg["host"], seg["marks"]
    if not gpu:
        raise ValueError(f"segment {key!r} recorded no GPU activity")
    ends = [r[3] + r[4] for r in gpu] + [h[1] + h[2] for h in host]
    lo, hi = window or (min([r[3] for r in gpu] + [h[1] for h in host]), max(ends))
    width = hi - lo
    tiny = width / 1500  # the narrowest bar drawn, so a 1 µs kernel stays visible
    streams = sorted({int(r[2]) for r in gpu})
    row = {s: len(streams) - 1 - i for i, s in enumerate(streams)}
    host_y = len(streams) + 0.4
    colour = {label: c for label, c, _ in CATEGORIES}
    seen: set[str] = set()
    for s in streams:
        gaps = [(a, b - a) for a, b in idle_intervals([r for r in gpu], lo, hi) if b - a > 1.0]
        ax.broken_barh(gaps, (row[s] - 0.42, 0.84), facecolors="#f6d8d4", zorder=0)
        bars: dict[str, list[tuple[float, float]]] = {}
        for r in gpu:
            if int(r[2]) != s or r[3] + r[4] < lo or r[3] > hi:
                continue
            cat = category(names[r[0]], r[1])
            bars.setdefault(cat, []).append((r[3], max(r[4], tiny)))
        for cat in sorted(bars):
            seen.add(cat)
            ax.broken_barh(bars[cat], (row[s] - 0.35, 0.7), facecolors=colour[cat], zorder=2)
    by_kind: dict[str, list[tuple[float, float]]] = {}
    for h in host:
        if h[1] + h[2] < lo or h[1] > hi:
            continue
        by_kind.setdefault(_host_kind(names[h[0]]), []).append((h[1], max(h[2], tiny)))
    for kind in sorted(by_kind):
        ax.broken_barh(by_kind[kind], (host_y - 0.3, 0.6), facecolors=HOST_COLOURS[kind], zorder=2)
    for label, start, dur in marks:
        a, b = max(start, lo), min(start + dur, hi)
        if b <= a:
            continue
        ax.plot([a, b], [host_y + 0.48] * 2, color="#444444", linewidth=1.2)
        ax.text(a, host_y + 0.55, label.split(":", 1)[-1], fontsize=7, va="bottom", ha="left")
    inside = [r for r in gpu if r[3] >= lo and r[3] + r[4] <= hi]
    gaps_all = idle_intervals(inside) if inside else []
    if gaps_all:
        a, b = max(gaps_all, key=lambda g: g[1] - g[0])
        if b - a > width * 0.02:
            ax.annotate(f"idle {format_number('us', b - a)}", ((a + b) / 2, -0.5),
                        xytext=(0, -2), textcoords="offset points", ha="center", va="top",
                        fontsize=7, color="#b8483e")
    ax.set_xlim(lo - width * 0.01, hi + width * 0.01)
    ax.set_ylim(-0.9, host_y + 1.1)
    ax.set_yticks([host_y] + [row[s] for s in streams],
                  ["host: CUDA calls"] + [f"GPU stream {s}" for s in streams])
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("time from the start of the segment (µs)")
    s = summarize(inside or gpu)
    zoom = "" if window is None else f", {format_number('us', width)} window"
    ax.set_title(f"{seg['title']}{zoom}\nspan {format_number('us', s.span_us)}, GPU busy "
                 f"{s.busy_pct:.0f}%, {s.ops} GPU activities, "
                 f"{enqueue_calls([h for h in host if lo <= h[1] <= hi], names)} enqueue calls "
                 f"({data['provenance']['gpu_name']})", loc="left", fontsize=8.5)
    from matplotlib.patches import Patch

    handles = [Patch(color=colour[c], label=c) for c, _, _ in CATEGORIES if c in seen]
    handles += [Patch(color=HOST_COLOURS[k], label=f"host {k}") for k in sorted(by_kind)]
    handles.append(Patch(color="#f6d8d4", label="GPU idle"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=5,
              fontsize=7, frameon=False)


def draw_steps(ax: Any, data: dict[str, Any]) -> None:
    steps = data.get("steps") or {}
    if not steps:
        raise ValueError("the trace has no timed steps")
    batches = sorted(steps, key=int)
    xs = list(range(len(batches)))
    top = max(steps[b][m]["median_us"] for b in batches for m in ("eager", "graph"))
    for offset, mode, colour, label in ((-0.2, "eager", "#9aa5b1", "eager: a launch per GPU op"),
                                        (0.2, "graph", "#3b6ea8", "CUDA graph: one launch")):
        values = [steps[b][mode]["median_us"] for b in batches]
        ax.bar([x + offset for x in xs], values, width=0.38, color=colour, label=label)
        for x, v in zip(xs, values, strict=True):
            ax.text(x + offset, v + top * 0.01, format_number("us", v), ha="center",
                    va="bottom", fontsize=7.5)
    ticks = []
    for b in batches:
        e, g = steps[b]["eager"], steps[b]["graph"]
        ticks.append(f"batch {b}\n{e.get('gpu_ops', '?')} GPU ops\n"
                     f"{e.get('enqueue_calls', '?')} vs {g.get('enqueue_calls', '?')} launches")
    ax.set_xticks(xs, ticks, fontsize=7.5)
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("step time (µs, median)")
    ax.grid(axis="x", visible=False)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=2, frameon=False)
    cfg = data.get("config", {})
    ax.set_title(f"decode step of a {cfg.get('layers', '?')}-layer, hidden {cfg.get('hidden', '?')} "
                 f"decoder, eager vs graph replay ({data['provenance']['gpu_name']})",
                 loc="left", fontsize=9)

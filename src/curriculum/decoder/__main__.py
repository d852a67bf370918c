"""`python -m curriculum.decoder`: check, time and profile the course's decoder on a GPU.

The package's docstring says what the run does and why. The command's options and refusals
live here and need no GPU; the run itself is `gpu`'s, imported only once they pass.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from curriculum.decoder import DATA_FILE, TOPIC, Config, problems


def gpu_missing(need_torch: bool = True) -> str | None:
    """Why the GPU half cannot run here, or None."""
    for name in ("cupy", "torch") if need_torch else ("cupy",):
        try:
            __import__(name)
        except ImportError:
            return f"{name} is not installed"
    if not need_torch:
        return None
    import torch

    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return None


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path("."), help="the project root")
    p.add_argument(
        "--out", type=Path, default=None, help=f"folder for {DATA_FILE} (default: kernels/{TOPIC}/)"
    )
    p.add_argument(
        "--batches", default=None, help="decode batches, comma-separated (default: 1,4,16)"
    )
    p.add_argument(
        "--time-cap", type=float, default=2.0, help="seconds of timing at most per configuration"
    )
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--prefill-compile-mode", default="max-autotune-no-cudagraphs")
    p.add_argument("--decode-compile-mode", default="reduce-overhead")
    p.add_argument(
        "--compile-batches",
        default=None,
        help="decode batches to torch.compile, comma-separated (default: all)",
    )
    p.add_argument("--piece", default=None, help=argparse.SUPPRESS)  # child process: one piece


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m curriculum.decoder", description=(__doc__ or "").split("\n\n")[0]
    )
    configure(p)
    args = p.parse_args(argv)
    reason = gpu_missing(need_torch=not args.piece)
    if reason:
        sys.stderr.write(f"decoder needs CuPy, PyTorch and a CUDA GPU: {reason}\n")
        return 2
    cfg = Config()
    if args.batches:
        try:
            batches = tuple(int(b) for b in args.batches.split(","))
        except ValueError:
            sys.stderr.write(f"--batches {args.batches!r}: not comma-separated integers\n")
            return 2
        cfg = Config(batches=batches)
    found = problems(cfg)
    if found:
        sys.stderr.write("decoder: the shapes break kernel rules: " + "; ".join(found) + "\n")
        return 2
    from curriculum.decoder import gpu

    if args.piece:
        return gpu.run_piece(args.root, cfg, args.piece)
    return gpu.run(args, cfg)


if __name__ == "__main__":
    sys.exit(main())

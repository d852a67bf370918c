"""CUDA puzzles: small kernels a reader completes, checked and timed on a GPU.

Each puzzle is a folder `content/puzzles/NN-name/` holding `puzzle.md` (front
matter and the spec), `starter.cu` (the kernel to complete), `solution.cu`
(the reference solution, shown only in editions whose tier reaches the
puzzle's `solution_access`) and `spec.py`, which binds `SPEC` to a `Spec`:
inputs, float64 reference, launch geometry and tolerance.

- `spec`: the `Spec` a puzzle's `spec.py` declares;
- `content`: loading and checking the folders;
- `check`: compiling, running and comparing a reader's file on the GPU;
- `site`: the puzzle pages of each edition;
- `cli`: `curriculum puzzle list | show N | check N FILE`.
"""

#!/usr/bin/env bash
# Measure a topic on a GPU machine that has CuPy, NumPy, PyTorch, rich and nvidia-ml-py but
# not this project's own dependencies: install the wheels carried in .whl/ (pydantic and its
# needs), run the bench sweep, a second pass of one headline case, the GPU tests and one
# compute-sanitizer memcheck pass at the smallest shapes. Logs and results go to $OUT.
#
#   bash scripts/device_bench.sh ['memory/*'] [REPEAT_CASE]
#
# Set CURRICULUM_GIT_REV / CURRICULUM_GIT_DIRTY when the tree arrives without .git.
set -uo pipefail

ONLY=${1:-'memory/*'}
REPEAT_CASE=${2:-memory/02_copy_vec4}
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
    export PYTHONPATH=/tmp/site:$PWD/src
else
    export PYTHONPATH=$PWD/src
fi
# The project CLI when it imports here; the bench's own entry point otherwise.
if python3 -c 'import curriculum.cli' 2>/dev/null; then
    BENCH=(python3 -m curriculum.cli --root "$PWD" bench)
else
    BENCH=(python3 -m curriculum.bench --root "$PWD")
fi

{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv
    python3 -c 'import cupy, numpy, pydantic; print("cupy", cupy.__version__, "numpy", numpy.__version__, "pydantic", pydantic.__version__)'
    echo "bench command: ${BENCH[*]}"
} >"$OUT/env.txt" 2>&1

# 1. The sweep: ceilings first, then every case not already up to date in
#    kernels/results, each timed twice to show the spread.
start=$(date +%s)
timeout 330 "${BENCH[@]}" --only "$ONLY" --repeat 2 --time-cap 10 \
    2>&1 | tee "$OUT/bench.log"
sweep_rc=${PIPESTATUS[0]}
echo "sweep: exit $sweep_rc, $(($(date +%s) - start)) s" | tee -a "$OUT/bench.log"
cp kernels/results/*.json "$OUT/" 2>/dev/null

# 2. The headline copy again in a separate invocation (new ceilings too), to a separate file.
timeout 90 "${BENCH[@]}" --only "$REPEAT_CASE" --headline --force \
    --repeat 2 --out "$OUT/repeat.json" 2>&1 | tee "$OUT/repeat.log"

# 3. The GPU tests: every version of the topic checked at its smallest shape.
topic=${ONLY%%/*}
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/bench/test_bench_gpu.py \
    -k "$topic" 2>&1 | tee "$OUT/pytest.log"

# 4. Memory checker over the correctness checks at the smallest shapes (no pooling).
if command -v compute-sanitizer >/dev/null; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 \
        "${BENCH[@]}" --only "$ONLY" --small --check-only \
        >"$OUT/memcheck.log" 2>&1
    echo "memcheck: exit $?" >>"$OUT/memcheck.log"
    tail -n 5 "$OUT/memcheck.log"
fi
exit "$sweep_rc"

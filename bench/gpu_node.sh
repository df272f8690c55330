#!/usr/bin/env bash
# The GPU path end to end, on a node with NVIDIA GPUs and a PyTorch with CUDA
# (a wheel: its LibTorch has CUDA and NCCL). Builds train alone against that
# LibTorch (DDPRUN_TRAIN_ONLY), then:
#   1. ddprun devices: the GPUs --nproc-per-node gpu counts, and who counted;
#   2. the mission's line, ddprun --nproc_per_node=gpu --standalone train, on
#      NCCL, with rank 0 SIGKILLed at the start of epoch 3, the group
#      restarted (--max-restarts=1) and resumed from the snapshot of epoch 2;
#      train --backend gloo then trains on the CPU, or (no Gloo headers in a
#      wheel) says in one line why it cannot, exit 2;
#   3. PyTorch's own DDP (bench/python/ddp_train.py) under ddprun on NCCL;
#   4. train_bench --nproc-per-node gpu: samples/s of ddprun + train against
#      torchrun + Python DDP on the same GPUs.
#
# Usage: bench/gpu_node.sh DDPRUN TRAIN_BENCH
#   DDPRUN, TRAIN_BENCH: ddprun and train_bench, built where Boost and the
#   launcher's other dependencies are (the packages, or a full build).
# Environment: PYTHON (default python3; must import torch with CUDA),
#   BUILD_DIR (default build-gpu in the repository), LOG_DIR (default a new
#   temporary dir), BENCH_RUNS (3), BENCH_EPOCHS (3), CMAKE_PREFIX_PATH
#   (colon-separated, read by CMake itself: CLI11, nlohmann_json and zlib
#   where they are not installed). A CUDA toolkit (nvcc), which a CUDA
#   wheel's TorchConfig.cmake looks for. Fashion-MNIST must be in
#   /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist).
# Exit status: 0 when every step passed, 1 when one failed (each says which), 2
# for bad usage.
set -uo pipefail

if (($# != 2)); then
  echo "usage: bench/gpu_node.sh DDPRUN TRAIN_BENCH" >&2
  exit 2
fi
ddprun=$(realpath "$1")
train_bench=$(realpath "$2")
python=${PYTHON:-python3}
# Relative to where it was called from, before the cd to the repository.
log_dir=$(realpath -m "${LOG_DIR:-$(mktemp -d -t ddprun-gpu.XXXXXX)}")
build_dir=$(realpath -m "${BUILD_DIR:-$(dirname "$0")/../build-gpu}")
data_dir=/usr/share/datasets/fashion-mnist
mkdir -p "$log_dir"
cd "$(dirname "$0")/.."
failed=()

step() { echo; echo "== $*"; }
fail() { echo "FAILED: $*"; failed+=("$*"); }

step "node"
nvidia-smi -L
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
"GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version())'
[[ -d $data_dir ]] || fail "no Fashion-MNIST in $data_dir"

step "build train against this PyTorch's LibTorch"
torch_cmake=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDDPRUN_TRAIN_ONLY=ON \
     -DCMAKE_PREFIX_PATH="$torch_cmake" >"$log_dir/configure.log" 2>&1 &&
   cmake --build "$build_dir" --parallel "$(nproc)" >"$log_dir/build.log" 2>&1; then
  grep "ddprun:" "$log_dir/configure.log"
  train=$(realpath "$build_dir/worker/train")
else
  tail -n 60 "$log_dir/configure.log"
  grep -B2 -A12 "error" "$log_dir/build.log" | head -n 150
  fail "build"
  exit 1
fi

step "1. ddprun devices"
"$ddprun" devices || fail "ddprun devices"
"$ddprun" devices --json || fail "ddprun devices --json"

step "2. the mission's line on NCCL, rank 0 killed at epoch 3, resumed"
snapshot="$log_dir/mission-snapshot.pt"
"$ddprun" --nproc_per_node=gpu --standalone --max-restarts=1 "$train" --task fmnist \
  --total-epochs 6 --save-every 2 --snapshot-path "$snapshot" --ignore-snapshot \
  --fail-at-epoch 3 --fail-rank 0 --fail-mode kill >"$log_dir/mission.log" 2>&1
status=$?
grep -E "workers|world|injected|restart|resuming|epoch|throughput|exit|error" "$log_dir/mission.log"
grep -q "(nccl)" "$log_dir/mission.log" || fail "mission: train did not say it trains on nccl"
grep -q "resuming from .* after epoch 2" "$log_dir/mission.log" ||
  fail "mission: no resume from the snapshot of epoch 2"
((status == 0)) || fail "mission: ddprun exited $status"
# The agent sets both names of NCCL's error handling; train keeps the one its
# LibTorch reads, so 2.2 and later have nothing to warn about.
! grep -q "NCCL_ASYNC_ERROR_HANDLING is deprecated" "$log_dir/mission.log" ||
  fail "mission: train's LibTorch warned that NCCL_ASYNC_ERROR_HANDLING is deprecated"

step "2b. train --backend gloo: trains where this LibTorch has Gloo's headers, else one line, exit 2"
"$train" --backend gloo --task mlp --total-epochs 1 --snapshot-path "$log_dir/gloo.pt" \
  >"$log_dir/gloo.log" 2>&1
status=$?
tail -n 3 "$log_dir/gloo.log"
echo "exit $status"
((status == 0 || status == 2)) || fail "train --backend gloo exited $status"

step "3. PyTorch's DDP under ddprun on NCCL"
PYTHON_EXEC=$python "$ddprun" --nproc_per_node=gpu --standalone bench/python/ddp_train.py \
  --task fmnist --total-epochs 2 --backend nccl >"$log_dir/python.log" 2>&1 ||
  fail "Python DDP under ddprun (exit $?)"
grep -E "epoch|throughput|error|Error" "$log_dir/python.log"

step "4. train_bench --nproc-per-node gpu"
"$train_bench" --nproc-per-node gpu --backend auto --tasks mlp,fmnist \
  --runs "${BENCH_RUNS:-3}" --epochs "${BENCH_EPOCHS:-3}" --train "$train" --ddprun "$ddprun" \
  --script "$PWD/bench/python/ddp_train.py" --python "$(command -v "$python")" \
  2>"$log_dir/bench.err" || { tail -n 20 "$log_dir/bench.err"; fail "train_bench"; }

echo
echo "logs: $log_dir"
if ((${#failed[@]})); then
  echo "gpu_node: ${#failed[@]} step(s) failed: ${failed[*]}"
  exit 1
fi
echo "gpu_node: every step passed"

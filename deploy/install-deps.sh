#!/usr/bin/env bash
# Installs ddprun's build and test dependencies from Debian 12's archive.
# Everything is a Debian package; nothing is fetched from anywhere else.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev python3-torch zlib1g-dev libssl-dev nettle-dev libhwloc-dev
  dataset-fashion-mnist
  iproute2 procps zsh tcsh  # zsh, tcsh: the completion scripts run in the real shells
  slurmctld slurmd slurm-client munge  # a real Slurm cluster in the tests; scontrol for the hostlist tests
  etcd-server etcd-client  # a real etcd cluster in the tests (the etcd rendezvous backend)
  prometheus  # a real Prometheus server scraping a job, and promtool, in the metrics tests
  help2man file  # the man pages, made from each program's --help; file: CPack's shlibdeps
  debootstrap systemd man-db  # the package test: a fresh Debian 12 chroot, systemd-analyze, man -w
  elfutils gdb  # eu-stack (gdb without it): every local worker's stacks, taken before a hung one is killed
  python3-yaml  # deploy/kubernetes's manifests, read by their test
  openssh-server openssh-client  # --hostfile's tests: an sshd on each test host, ssh to it
  clang-format clang-tidy  # deploy/check-format.sh (which CI runs) and deploy/tidy.sh; version 14
)
# The libFuzzer target (-DDDPRUN_FUZZ=ON) needs clang; install on request.
if [[ "${DDPRUN_WITH_CLANG:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

sudo_cmd=()
if [[ "$(id -u)" != 0 ]]; then
  sudo_cmd=(sudo)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"

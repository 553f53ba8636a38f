#!/usr/bin/env bash
# Installs everything gang needs to build and test on Debian 12 (bookworm).
# The one list of system packages: README and .ci/run both use this script.
# Run as root, or as a user who may sudo.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # compiler, build system, pkg-config
  libgloo-dev                        # the Gloo backend
  libhiredis-dev libibverbs-dev      # what libgloo-dev depends on, named explicitly
  libcmocka-dev                      # the C tests
  swig golang-go                     # language bindings (SWIG, Go)
  python3-dev python3-numpy python3-pytest
  iproute2                           # `ip`, used by network-interface tests
  redis-server                       # redis:// store tests (unit.redis_store)
  python3-torch                      # torchrun interop test (multiproc.torchrun)
  gcc-multilib                       # abi.struct_layout_32: the public structs on 32-bit
  abigail-tools                      # abi.gate: abidw/abidiff against the baseline
  lintian                            # check-debs: a package that depends on libgang0
  python3-build python3-setuptools python3-wheel python3-venv python3-pip
                                     # the wheel (bindings/python/pyproject.toml)
  luajit rustc fp-compiler default-jdk-headless libjna-java
                                     # examples/ffi: the C ABI from LuaJIT,
                                     # Rust, Free Pascal and Java (JNA)
  clang-14 libclang-rt-14-dev llvm-14  # libFuzzer (tests/fuzz): compiler, its
                                     # fuzzer/sanitizer runtimes (only
                                     # recommended by clang-14), symbolizer
)

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"

#!/usr/bin/env bash
# Makes (once) and prints the path of a virtual environment holding PyPI's
# torch, for the tests of gang against a current PyTorch (tests/torch/).
#
#   .ci/torch-venv.sh [VERSION]      default: $GANG_TORCH_VERSION, else 2.15.0
#
# Prints the environment's directory on stdout (its python is bin/python);
# progress goes to stderr. Exits 77 when PyPI cannot be reached and no
# environment for that version is cached, so callers can skip.
#
# PyPI has no CPU-only torch for Linux x86_64: its wheel is built with CUDA
# and depends on NVIDIA's libraries, which libtorch links at load time, so
# they are needed even on a machine without a GPU. Only triton (the compiler
# behind torch.compile, which none of these tests uses) is left out; numpy is
# added for gang's Python example. About 2.5 GB download, 6 GB on disk.
#
# The environment is kept outside the work tree, so a second run (or a
# second clone) reuses it: $GANG_TORCH_VENV_ROOT if set, else
# /var/cache/gang-torch-venv when writable, else ~/.cache/gang/torch-venv;
# one directory per version. A half-made one (no .complete) is made again.
set -euo pipefail

version="${1:-${GANG_TORCH_VERSION:-2.15.0}}"
python="${GANG_TORCH_BASE_PYTHON:-/usr/bin/python3}"

if [ -n "${GANG_TORCH_VENV_ROOT:-}" ]; then
  root="$GANG_TORCH_VENV_ROOT"
elif mkdir -p /var/cache/gang-torch-venv 2>/dev/null &&
     [ -w /var/cache/gang-torch-venv ]; then
  root=/var/cache/gang-torch-venv
else
  root="$HOME/.cache/gang/torch-venv"
fi
venv="$root/torch-$version"

say() { echo "torch-venv: $*" >&2; }

# What torch.testing._internal imports besides torch, for PyTorch's own
# DistributedTest (tests/torch/dist_suite.py); added to a cached environment
# made before it was asked for.
extras=(expecttest)

if [ -f "$venv/.complete" ] &&
   "$venv/bin/python" -c "import torch.distributed" 2>/dev/null; then
  if ! "$venv/bin/python" -c "import expecttest" 2>/dev/null; then
    timeout 300 "$venv/bin/python" -m pip --disable-pip-version-check --no-input \
      --no-cache-dir install -q "${extras[@]}" >&2 ||
      say "could not add ${extras[*]} (PyTorch's DistributedTest will be skipped)"
  fi
  say "using $venv (torch $version, cached)"
  echo "$venv"
  exit 0
fi

if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  say "$python cannot make virtual environments (Debian: apt-get install python3-venv)"
  exit 77
fi

rm -rf "$venv"
mkdir -p "$root"
"$python" -m venv "$venv" >&2
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input --no-cache-dir)

# A cheap question first, so an offline machine skips at once instead of
# failing half-way through a download.
if ! timeout 60 "${pip[@]}" index versions torch >/dev/null 2>&1; then
  rm -rf "$venv"
  say "PyPI cannot be reached (pip index versions torch failed): not testing torch $version"
  exit 77
fi

start=$(date +%s)
say "installing torch $version from PyPI into $venv"
"${pip[@]}" install -q --no-deps "torch==$version" >&2
# torch's own requirements for this platform, less triton (pip will say
# that triton is missing: that is expected).
mapfile -t deps < <("$venv/bin/python" - <<'EOF'
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement
for line in requires("torch") or []:
    req = Requirement(line)
    if req.name.lower() == "triton":
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
EOF
)
# numpy 2 only from torch 2.3 on.
numpy=numpy
case "$version" in 1.*|2.0.*|2.1.*|2.2.*) numpy="numpy<2" ;; esac
"${pip[@]}" install -q "${deps[@]}" "$numpy" "${extras[@]}" >&2
"$venv/bin/python" -c "import torch.distributed, numpy" >&2
touch "$venv/.complete"
say "torch $version ready in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
echo "$venv"

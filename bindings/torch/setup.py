"""Builds gang_torch, gang's torch.distributed backend compiled against the
torch installed in the building Python (torch's cpp_extension), linked to
libgang:

  GANG_INCLUDE=<dir> GANG_LIBDIR=<dir> python setup.py build_ext --inplace
  python -m pip wheel --no-build-isolation --no-deps .   (needs torch first)

Without GANG_INCLUDE/GANG_LIBDIR, pkg-config finds an installed gang. The
extension finds libgang at run time as the `gang` Python package loaded it
(gang_torch imports gang first), else through its run path (GANG_LIBDIR).
A wheel is for the torch it was built against: its requirement pins that
torch's release (torch==X.Y.*)."""

import os
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def gang_paths():
    include = os.environ.get("GANG_INCLUDE")
    libdir = os.environ.get("GANG_LIBDIR")
    if include and libdir:
        return include.split(os.pathsep), libdir
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "gang"], text=True)
        libdir = subprocess.check_output(["pkg-config", "--variable=libdir", "gang"],
                                         text=True).strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"setup.py: set GANG_INCLUDE and GANG_LIBDIR, or PKG_CONFIG_PATH to "
                         f"an installed gang's lib/pkgconfig ({e})") from None
    return [f[2:] for f in cflags.split()], libdir


def cuda_paths():
    """(include dir, runtime library) of the CUDA runtime this torch was
    built with, or None for a torch without CUDA (GANG_TORCH_CUDA=0 forces
    None). The torch wheel's own NVIDIA packages come first (cu13's
    nvidia/cu13, cu12's nvidia/cuda_runtime), then CUDA_HOME."""
    if torch.version.cuda is None or os.environ.get("GANG_TORCH_CUDA") == "0":
        return None
    major = torch.version.cuda.split(".")[0]
    nvidia = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia")
    homes = [os.path.join(nvidia, f"cu{major}"), os.path.join(nvidia, "cuda_runtime")]
    from torch.utils.cpp_extension import CUDA_HOME
    if CUDA_HOME:
        homes.append(CUDA_HOME)
    for home in homes:
        include = os.path.join(home, "include")
        if not os.path.exists(os.path.join(include, "cuda_runtime_api.h")):
            continue
        for lib in ("lib", "lib64"):
            runtime = os.path.join(home, lib, f"libcudart.so.{major}")
            if os.path.exists(runtime):
                return include, runtime
    raise SystemExit(f"setup.py: torch {torch.__version__} has CUDA {torch.version.cuda}, but no "
                     f"CUDA runtime headers and libcudart.so.{major} were found under "
                     f"{', '.join(homes)} (GANG_TORCH_CUDA=0 builds for CPU tensors only)")


include_dirs, libdir = gang_paths()
release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
sources = ["backend.cc", "callbacks.cc", "cuda.cc", "errors.cc", "module.cc", "sparse.cc",
           "store.cc", "tensors.cc", "work.cc"]
cuda = cuda_paths()
macros, libraries, link_args = [], ["gang"], []
if cuda is not None:
    # Stream-ordered CUDA calls (csrc/cuda.cc): c10's CUDA streams and
    # events, and the runtime torch itself loads.
    include_dirs = include_dirs + [cuda[0]]
    macros.append(("GANG_TORCH_CUDA", "1"))
    libraries.append("c10_cuda")
    link_args.append(cuda[1])

setup(
    name="gang-torch",
    version="0.4.0",
    description="gang as a torch.distributed backend (compiled against one torch release)",
    packages=["gang_torch"],
    install_requires=["gang", f"torch=={release}.*"],
    ext_modules=[CppExtension(
        "gang_torch._C",
        sources=[os.path.join("csrc", s) for s in sources],
        include_dirs=include_dirs,
        define_macros=macros,
        library_dirs=[libdir],
        libraries=libraries,
        runtime_library_dirs=[libdir],
        extra_compile_args=["-O2", "-g0", "-Wall", "-Wno-unused-parameter"],
        extra_link_args=link_args,
    )],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
    entry_points={"torch.distributed.backends": ["gang = gang_torch:register"]},
)

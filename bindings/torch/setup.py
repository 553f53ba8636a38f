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


include_dirs, libdir = gang_paths()
release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
sources = ["backend.cc", "callbacks.cc", "errors.cc", "module.cc", "sparse.cc", "store.cc",
           "tensors.cc", "work.cc"]

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
        library_dirs=[libdir],
        libraries=["gang"],
        runtime_library_dirs=[libdir],
        extra_compile_args=["-O2", "-g0", "-Wall", "-Wno-unused-parameter"],
    )],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
    entry_points={"torch.distributed.backends": ["gang = gang_torch:register"]},
)

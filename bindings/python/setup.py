"""Builds gang's wheel (see pyproject.toml): runs SWIG on gang_python.i,
compiles the extension gang._capi against libgang as pkg-config describes
it, and bundles that libgang (and its backend modules in gang/gang/) inside
the package, found through an $ORIGIN run path. GANG_WHEEL_BUNDLE=0 links
the installed libgang instead (run path: its libdir)."""

import glob
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SWIG_OUT = os.path.join(HERE, "build", "swig")
BUNDLE = os.environ.get("GANG_WHEEL_BUNDLE", "1") != "0"


def pkg_config(*args):
    try:
        out = subprocess.check_output(["pkg-config", *args, "gang"], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"setup.py: pkg-config cannot find gang ({e}); set PKG_CONFIG_PATH "
                         f"to the lib/pkgconfig of an installed gang") from None
    return out.split()


def swig():
    """gang_python.i -> build/swig/capi_wrap.c and capi.py (once)."""
    wrap = os.path.join(SWIG_OUT, "capi_wrap.c")
    if not os.path.exists(wrap):
        os.makedirs(SWIG_OUT, exist_ok=True)
        includes = [f for f in pkg_config("--cflags-only-I")]
        subprocess.check_call(["swig", "-python", "-builtin", *includes,
                               "-I" + HERE, "-outdir", SWIG_OUT, "-o", wrap,
                               os.path.join(HERE, "gang_python.i")])
    return wrap


class BuildPy(build_py):
    def run(self):
        super().run()
        swig()
        target = os.path.join(self.build_lib, "gang")
        shutil.copy(os.path.join(SWIG_OUT, "capi.py"), target)
        if BUNDLE:
            libdir = pkg_config("--variable=libdir")[0]
            lib = os.path.realpath(os.path.join(libdir, "libgang.so.0"))
            shutil.copy(lib, os.path.join(target, "libgang.so.0"))
            modules = glob.glob(os.path.join(libdir, "gang", "libgang-*.so"))
            if modules:
                os.makedirs(os.path.join(target, "gang"), exist_ok=True)
                for m in modules:
                    shutil.copy(m, os.path.join(target, "gang"))


class BuildExt(build_ext):
    def run(self):
        swig()
        super().run()


libdir = pkg_config("--variable=libdir")[0]
setup(
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    ext_modules=[Extension(
        "gang._capi",
        sources=[os.path.join("build", "swig", "capi_wrap.c")],
        include_dirs=[f[2:] for f in pkg_config("--cflags-only-I")],
        library_dirs=[libdir],
        libraries=["gang"],
        runtime_library_dirs=["$ORIGIN"] if BUNDLE else [libdir],
    )],
)

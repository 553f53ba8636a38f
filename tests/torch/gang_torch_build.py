"""Builds gang_torch (bindings/torch, gang's compiled torch.distributed
backend) for the torch of a given Python, against the libgang of a build
tree, into that build tree: BUILD/bindings/torch/torch-VERSION/lib, which
the tests put on PYTHONPATH. Incremental: setuptools compiles again only
what changed.

  python gang_torch_build.py PYTHON BUILD_DIR    prints the directory
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(SOURCE, "bindings", "torch")


def torch_version(python):
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True)
    return out.stdout.strip() if out.returncode == 0 else None


def build(python, build_dir):
    """(directory to put on PYTHONPATH, None) or (None, why not)."""
    version = torch_version(python)
    if version is None:
        return None, f"{python} has no torch"
    out = os.path.join(build_dir, "bindings", "torch", f"torch-{version.split('+')[0]}")
    lib = os.path.join(out, "lib")
    env = dict(os.environ)
    env.update({
        "GANG_INCLUDE": os.pathsep.join([os.path.join(SOURCE, "include"),
                                         os.path.join(build_dir, "include")]),
        "GANG_LIBDIR": build_dir,
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    r = subprocess.run([python, "setup.py", "-q", "build", "--build-lib", lib,
                        "--build-temp", os.path.join(out, "tmp")],
                       cwd=PACKAGE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        return None, f"building gang_torch for torch {version} failed:\n{r.stdout[-3000:]}"
    return lib, None


if __name__ == "__main__":
    path, why = build(sys.argv[1], os.path.abspath(sys.argv[2]))
    if path is None:
        print(why, file=sys.stderr)
        sys.exit(1)
    print(path)

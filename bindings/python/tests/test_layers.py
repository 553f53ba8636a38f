"""The three layers: gang.capi (SWIG) -> gang -> gang.torch, each using only
the one below. gang.torch imports gang's public names alone (no capi, no
private module or name); gang imports neither torch nor gang.torch; and the
package CMake builds and installs holds every module of the source tree."""

import ast
import os
import subprocess
import sys

import pytest

import gang

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gang")
TORCH_LAYER = os.path.join(SOURCE, "torch")


def _is_gang(module):
    """Whether an absolute module name is gang's own, below gang.torch."""
    return module == "gang" or (module.startswith("gang.")
                                and not module.startswith("gang.torch"))


def violations(source, filename="<source>"):
    """What a module of gang.torch uses of gang beyond its public API: each
    a line "file:line: what"."""
    public = set(gang.__all__)
    found = []

    def bad(node, what):
        found.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom):
            # level 2 is gang (from .. import x); level 1 is gang.torch.
            below = node.level == 2 or (node.level == 0 and _is_gang(node.module or ""))
            if node.level > 2:
                bad(node, f"imports from {'.' * node.level}{node.module or ''}")
            elif below and node.module not in (None, "gang"):
                bad(node, f"imports from the module {node.module} of gang "
                          f"(take gang's public names: from .. import Name)")
            elif below:
                for alias in node.names:
                    if alias.name not in public:
                        bad(node, f"imports {alias.name}, not in gang.__all__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name != "gang" and _is_gang(alias.name):
                    bad(node, f"imports {alias.name}")
        elif isinstance(node, ast.Attribute):
            if node.attr == "capi":
                bad(node, "uses .capi")
            elif (isinstance(node.value, ast.Name) and node.value.id == "gang"
                  and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad(node, f"uses gang.{node.attr}")
    return found


def _modules(directory):
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def test_gang_torch_uses_only_gangs_public_api():
    found = []
    for path in _modules(TORCH_LAYER):
        with open(path) as f:
            found += violations(f.read(), os.path.relpath(path, SOURCE))
    assert not found, "gang.torch reaches below gang's public API:\n" + "\n".join(found)


def test_the_layer_check_catches_what_it_should():
    planted = [
        "from .. import capi",
        "from .. import _gang",
        "from .._buffers import view",
        "from ..errors import GangError",
        "from gang._gang import Gang",
        "from gang import capi",
        "import gang.capi",
        "import gang\nx = gang._buffers",
        "import gang\nx = gang.capi.GANG_SUM",
        "from ... import x",
    ]
    for source in planted:
        assert violations(source), f"not caught: {source!r}"
    fine = ["from .. import Gang, create, timeout_ms", "from ._store import StoreAdapter",
            "import gang\nx = gang.__version__", "import torch.distributed as dist"]
    for source in fine:
        assert not violations(source), f"refused: {source!r}"


def test_gang_never_imports_gang_torch():
    """No module of gang outside gang/torch imports gang.torch (Gang's
    as_process_group and fairseq2's ProcessGroupGang reach it by name when
    called): the layers have no cycle."""
    found = []
    for path in _modules(SOURCE):
        if path.startswith(TORCH_LAYER + os.sep):
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        rel = os.path.relpath(path, SOURCE)
        level = rel.count(os.sep) + 1  # "from .torch" in gang/, "from ..torch" in compat/
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if (node.level == level and (module == "torch" or module.startswith("torch.")
                                             or (not module and any(a.name == "torch"
                                                                    for a in node.names)))
                        or node.level == 0 and module.startswith("gang.torch")):
                    found.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Import):
                if any(a.name.startswith("gang.torch") for a in node.names):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, "gang imports gang.torch at " + ", ".join(found)


def test_import_gang_imports_neither_torch_nor_gang_torch():
    code = ("import sys, gang; "
            "print(sorted(m for m in ('torch', 'gang.torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.strip()
    assert out == "[]", f"import gang imported {out}"


def test_the_built_package_holds_the_source_tree():
    """bindings/python/CMakeLists.txt lists the package's modules (copied
    into the build and installed); a module left out of the lists fails
    here."""
    built = os.path.dirname(gang.__file__)
    if os.path.realpath(built) == os.path.realpath(SOURCE):
        pytest.skip("gang is imported from its source tree")

    def tree(top, skip=()):
        return sorted(os.path.relpath(p, top) for p in _modules(top)
                      if os.path.basename(p) not in skip)

    assert tree(built, skip=("capi.py",)) == tree(SOURCE)


def test_pyproject_lists_every_package():
    here = os.path.join(SOURCE, "..", "pyproject.toml")
    with open(here) as f:
        text = f.read()
    packages = []
    for root, _, files in os.walk(SOURCE):
        if "__init__.py" in files:
            rel = os.path.relpath(root, SOURCE)
            packages.append("gang" if rel == "." else "gang." + rel.replace(os.sep, "."))
    for package in packages:
        assert f'"{package}"' in text, f"pyproject.toml's packages lack {package}"

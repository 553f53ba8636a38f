"""Reads bench/compare.sh's results in a folder, prints the table of times
and ratios, and draws busbw against size to <folder>/compare.png."""
import json
import os
import sys

FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n,
          "broadcast": lambda n: 1.0,
          "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n}
COLLECTIVES = tuple(FACTOR)


def gang(path):
    doc = json.load(open(path))
    rows = {}
    for r in doc["results"]:
        half = r["out_of_place"] or r["in_place"]
        if r["size"] > 0:
            rows[r["size"]] = half["time_us"]
    return rows


def peer(path):
    rows = {}
    for line in open(path):
        size, us = line.split()
        if int(size) > 0:
            rows[int(size)] = float(us)
    return rows


def label(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def runs(folder):
    """(collective, ranks) of every run in the folder, in the tables' order."""
    found = set()
    for name in os.listdir(folder):
        parts = name.split(".")
        if name.startswith("mpi.") and len(parts) == 4 and parts[1] in FACTOR:
            found.add((parts[1], int(parts[2])))
    return sorted(found, key=lambda cn: (cn[1], COLLECTIVES.index(cn[0])))


def main(folder):
    impls = [("shm", "gang-shm.{c}.{n}.json", gang), ("gang gloo", "gang-gloo.{c}.{n}.json", gang),
             ("plain Gloo", "gloo.{c}.{n}.txt", peer), ("Open MPI", "mpi.{c}.{n}.txt", peer)]
    version = os.path.join(folder, "mpi.version")
    if os.path.exists(version):
        print("Open MPI:", open(version).read().strip() or "(version unknown)")
    plots = []
    for c, n in runs(folder):
        data = {name: read(os.path.join(folder, pat.format(c=c, n=n)))
                for name, pat, read in impls}
        sizes = sorted(set.intersection(*(set(d) for d in data.values())))
        print(f"\n{c}, {n} ranks: median time in us (largest over ranks)")
        print(f"{'size':>8} {'shm':>9} {'gang gloo':>10} {'plain Gloo':>11} {'Open MPI':>9}"
              f" {'shm/MPI':>8} {'shm/gloo':>9} {'shm/plain':>10} {'gloo/plain':>11}")
        for s in sizes:
            t = [data[name][s] for name, _, _ in impls]
            print(f"{label(s):>8} {t[0]:9.1f} {t[1]:10.1f} {t[2]:11.1f} {t[3]:9.1f}"
                  f" {t[0] / t[3]:8.2f} {t[0] / t[1]:9.3f} {t[0] / t[2]:10.3f}"
                  f" {t[1] / t[2]:11.2f}")
        plots.append((c, n, sizes, data))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(no matplotlib: no plot)")
        return
    cols = len({c for c, _, _, _ in plots})
    rows = -(-len(plots) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax, (c, n, sizes, data) in zip(axes.flat, plots):
        for name, _, _ in impls:
            bw = [s / data[name][s] / 1e3 * FACTOR[c](n) for s in sizes]
            ax.plot(sizes, bw, marker="o", markersize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{c}, {n} ranks")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend()
    fig.tight_layout()
    png = os.path.join(folder, "compare.png")
    fig.savefig(png, dpi=90)
    print(f"\nplot: {png}")


if __name__ == "__main__":
    main(sys.argv[1])

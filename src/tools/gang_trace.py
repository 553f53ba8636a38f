#!/usr/bin/env python3
"""gang-trace: reads the flight-recorder dumps of every rank of a job and says
who is behind and where ranks diverge.

    gang-trace DUMP [DUMP ...]      files, or directories of them

Each rank appends its dumps to the file GANG_FLIGHT_RECORDER names (gangrun
sets one per job and rank); a dump is written when a gang fails and when the
rank gets SIGURG (gangrun sends it to every rank when it gets SIGUSR2). For
each gang, the newest dump of each rank is read, and the report says:

  - which operation every rank is in, and for how long it has waited;
  - which ranks are behind (have not issued what the others wait in);
  - the first collective the ranks issued differently (call, dtype, op,
    count or root), which is a mismatch in the program;
  - which ranks left no dump.

Exit status: 0 when every rank is in step, 1 when some are behind or
diverge, 2 on bad input.
"""

import os
import re
import sys

HEADER = re.compile(
    r'^gang "(?P<gang>.*)" rank (?P<rank>\d+) of (?P<size>\d+)'
    r'(?: \(global rank (?P<global>\d+)\))?(?: at (?P<when>\S+))?: (?P<why>.*)$')
# Counts that legitimately differ between ranks.
OWN_COUNTS = {"gang_all_gatherv", "gang_all_to_allv", "gang_reduce_scatterv"}


class Op:
    __slots__ = ("id", "seq", "call", "dtype", "op", "count", "root", "status",
                 "ago_ms", "took_ms")

    def key(self):
        count = None if self.call in OWN_COUNTS else self.count
        root = self.root if self.call in ROOTED else None
        return (self.call, self.dtype, self.op, count, root)

    def describe(self):
        s = "%s #%d (%s" % (self.call, self.seq, self.dtype)
        if self.op != "-":
            s += ", " + self.op
        if self.call in ROOTED:
            s += ", root %d" % self.root
        if self.call not in OWN_COUNTS:
            s += ", count %d" % self.count
        return s + ")"


ROOTED = {"gang_broadcast", "gang_reduce", "gang_gather", "gang_scatter"}


def parse_op(line):
    # op# seq call dtype op count root status... issued-ago / took
    head, _, tail = line.rpartition(" / ")
    parts = head.split()
    if len(parts) < 9:
        return None
    op = Op()
    try:
        op.id, op.seq = int(parts[0]), int(parts[1])
        op.call, op.dtype, op.op = parts[2], parts[3], parts[4]
        op.count, op.root = int(parts[5]), int(parts[6])
        op.status = " ".join(parts[7:-1])
        op.ago_ms = int(parts[-1])
    except ValueError:
        return None
    tail = tail.strip()
    op.took_ms = int(tail) if tail.isdigit() else None
    return op


def read_dumps(path):
    """Yields (header dict, [Op]) for every dump in a file."""
    current = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = HEADER.match(line)
            if m:
                if current:
                    yield current
                current = (m.groupdict(), [])
                continue
            if current is None or not line.strip() or line.startswith("op#"):
                continue
            op = parse_op(line)
            if op is not None:
                current[1].append(op)
    if current:
        yield current


def files_of(args):
    for a in args:
        if os.path.isdir(a):
            for name in sorted(os.listdir(a)):
                p = os.path.join(a, name)
                if os.path.isfile(p):
                    yield p
        else:
            yield a


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def analyse(gang, size, dumps, out):
    """dumps: rank -> (header, ops). Returns True when the ranks are in step."""
    ok = True
    out.append('gang "%s" (%d ranks, dumps from %d)' % (gang, size, len(dumps)))
    missing = [r for r in range(size) if r not in dumps]
    if missing:
        ok = False
        out.append("  no dump from %s: not running, or not in this gang yet" %
                   ranks_text(missing))
    # Collectives by seq, per rank (point-to-point has seq 0: two ranks only).
    by_rank = {r: {op.seq: op for op in ops if op.seq > 0}
               for r, (_, ops) in dumps.items()}
    last = {r: max(seqs) if seqs else 0 for r, seqs in by_rank.items()}
    # Divergence: the first seq every rank that recorded it issued alike.
    common = sorted(set().union(*[set(s) for s in by_rank.values()]))
    for seq in common:
        seen = {r: ops[seq] for r, ops in by_rank.items() if seq in ops}
        keys = {}
        for r, op in seen.items():
            keys.setdefault(op.key(), []).append(r)
        if len(keys) > 1:
            ok = False
            out.append("  DIVERGED at collective #%d:" % seq)
            for _, ranks in sorted(keys.items(), key=lambda kv: min(kv[1])):
                out.append("    %s called %s" %
                           (ranks_text(ranks), seen[ranks[0]].describe()))
            break
    # Who is where.
    newest = max(last.values()) if last else 0
    for r in sorted(dumps):
        ops = dumps[r][1]
        waiting = [op for op in ops if op.status == "IN PROGRESS"]
        if waiting:
            op = waiting[0]
            where = "in %s, waiting %.1f s" % (op.describe(), op.ago_ms / 1000.0)
        elif ops:
            op = ops[-1]
            where = "idle after %s (%s)" % (op.describe() if op.seq else op.call,
                                           op.status.lower())
        else:
            where = "no operations recorded"
        behind = newest - last.get(r, 0)
        note = ""
        if behind > 0:
            ok = False
            note = "  <- BEHIND by %d collective%s" % (behind, "" if behind == 1 else "s")
        out.append("  rank %d: %s%s" % (r, where, note))
    if ok:
        out.append("  all ranks are in step")
    else:
        late = [r for r in dumps if last.get(r, 0) < newest]
        if late:
            ahead = [r for r in dumps if last.get(r, 0) == newest]
            out.append("  %s %s not reached collective #%d, which %s %s in: "
                       "look at what %s %s doing (or waiting for) instead" %
                       (ranks_text(late), "has" if len(late) == 1 else "have",
                        newest, ranks_text(ahead), "is" if len(ahead) == 1 else "are",
                        "it" if len(late) == 1 else "they",
                        "is" if len(late) == 1 else "are"))
    return ok


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    gangs = {}  # name -> {"size": n, "dumps": {rank: (header, ops)}}
    for path in files_of(argv[1:]):
        try:
            for header, ops in read_dumps(path):
                g = gangs.setdefault(header["gang"], {"size": int(header["size"]),
                                                      "dumps": {}})
                # The newest dump of each rank wins (files are appended to).
                g["dumps"][int(header["rank"])] = (header, ops)
        except OSError as e:
            print("gang-trace: %s: %s" % (path, e.strerror), file=sys.stderr)
            return 2
    if not gangs:
        print("gang-trace: no flight-recorder dumps in %s" % " ".join(argv[1:]),
              file=sys.stderr)
        return 2
    out = []
    in_step = True
    for name in sorted(gangs):
        in_step &= analyse(name, gangs[name]["size"], gangs[name]["dumps"], out)
    print("\n".join(out))
    return 0 if in_step else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

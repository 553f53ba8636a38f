#!/bin/sh
# unit.gloo_seam: the Gloo internals the gloo backend builds on are the ones
# it was written and checked against.
#
# src/backends/gloo/gloo_pairs.cc derives its authenticated pair from
# Gloo's internal gloo::transport::tcp::Pair and reaches into it (the
# listening socket it opens, its state, its device's descriptor table, the
# context's pair table; the layout of Debian's libgloo-dev is re-declared in
# src/backends/gloo/compat), and gloo_view.cc derives from tcp::Context and
# tcp::UnboundBuffer (see gloo_pairs.h). Gloo promises none of that. These headers are
# the seam: when an upgrade of Gloo changes one, this test fails, naming it,
# until someone has re-read gloo_pairs.cc against the new headers, run the
# gloo tests, and recorded the new hashes in tests/unit/gloo_seam.sha256
# (sh tests/unit/test_gloo_seam.sh INCLUDE_DIR --record).
#
#   test_gloo_seam.sh INCLUDE_DIR [--record]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
inc=$1
list="$here/gloo_seam.sha256"
if [ "${2:-}" = "--record" ]; then
  (cd "$inc" && sha256sum gloo/transport/tcp/pair.h gloo/transport/tcp/context.h \
     gloo/transport/tcp/device.h gloo/transport/tcp/address.h gloo/transport/tcp/loop.h \
     gloo/transport/tcp/unbound_buffer.h gloo/transport/pair.h gloo/transport/context.h \
     gloo/transport/unbound_buffer.h) > "$list"
  echo "recorded $(wc -l < "$list") headers of $inc in $list"
  exit 0
fi
cd "$inc"
if ! out=$(sha256sum -c "$list" 2>&1); then
  echo "$out" | grep -v ': OK$'
  echo "The Gloo headers above are not those src/backends/gloo/gloo_pairs.cc was checked"
  echo "against (tests/unit/gloo_seam.sha256): re-read the seam (gloo_pairs.cc, compat/)"
  echo "against them, run ctest -R gloo, then record them with --record."
  exit 1
fi
echo "the Gloo seam's $(wc -l < "$list") headers are the ones gloo_pairs.cc was checked against"

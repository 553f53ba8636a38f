// gang's collective algorithms over Gloo's pairs and unbound buffers, one
// family to a file: direct (gloo_direct.cc), ring (gloo_ring.cc) and
// log-round (gloo_tree.cc). Each runs one collective on one rank, framed
// (gloo_frames.h), every wait bounded by the operation's deadline; which
// one runs is the dispatch's choice (gloo_dispatch.cc), never theirs.
#pragma once

#include <cstddef>
#include <vector>

#include "backends/gloo/gloo_run.h"

namespace gang::backends::gloo_impl {

// Direct: every rank exchanges with every other (or the root with each) in
// one step.

// All-reduce, each input to every rank, reduced in rank order: small buffers, small gangs.
void direct_all_reduce(const Run& r);
// Reduce, each input to the root, reduced in rank order: small buffers, any gang.
void direct_reduce(const Run& r);
// Broadcast, the whole buffer from the root to each rank: small buffers, any size on 2.
void direct_broadcast(const Run& r);
// All-gather(v), each block to every rank (`counts` in elements): small blocks, small gangs.
void direct_all_gather(const Run& r, const std::vector<size_t>& counts);
// Reduce-scatter(v), each block to its rank, reduced there in rank order
// (`counts` in elements): small blocks, small gangs.
void direct_reduce_scatter(const Run& r, const std::vector<size_t>& counts);
// Gather, each block to the root: the only gather, every size.
void direct_gather(const Run& r);
// Scatter, each rank's block from the root: the only scatter, every size.
void direct_scatter(const Run& r);
// All-to-all(v), each pair swapping its blocks (elements): the only all-to-all, every size.
void direct_all_to_all(const Run& r, const std::vector<size_t>& send_counts,
                       const std::vector<size_t>& recv_counts);
// Barrier, a frame between every two ranks: gangs of up to 8 (kDirectRanks).
void direct_barrier(const Run& r);

// Ring: n-1 steps with the left and right neighbours, each rank moving 1/n
// of the buffer a step.

// All-reduce, a reduce-scatter then an all-gather: large buffers, or gangs over 8.
void ring_all_reduce(const Run& r);
// Reduce, a reduce-scatter then each rank's chunk to the root: large buffers.
void ring_reduce(const Run& r);
// Broadcast, the root's scatter then an all-gather: large buffers on gangs over 8.
void ring_broadcast(const Run& r);
// All-gather(v), `counts` per rank (elements): large blocks, or gangs over 8.
void ring_all_gather(const Run& r, const std::vector<size_t>& counts);
// Reduce-scatter(v), `counts` per rank (elements): large blocks, or gangs over 8.
void ring_reduce_scatter(const Run& r, const std::vector<size_t>& counts);

// Log-round: ceil(log2 n) rounds.

// Broadcast down a binomial tree from the root: large buffers on gangs of
// up to 8, and below a size that grows with the ranks on more.
void tree_broadcast(const Run& r);
// All-reduce by recursive doubling, each partial in the frames: buffers
// that fit in a frame on gangs over 8.
void doubling_all_reduce(const Run& r);
// Barrier by recursive doubling, the all-reduce's exchanges without data:
// gangs over 8.
void doubling_barrier(const Run& r);

}  // namespace gang::backends::gloo_impl

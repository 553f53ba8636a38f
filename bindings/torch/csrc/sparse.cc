#include "sparse.h"

#include <cstdint>
#include <vector>

namespace gang_torch {
namespace {

// A tensor's elements as bytes (contiguous, one dimension).
at::Tensor bytes_of(const at::Tensor& t) {
  at::Tensor flat = t.contiguous().reshape({-1});
  return flat.numel() == 0 ? at::empty({0}, t.options().dtype(at::kByte))
                           : flat.view(at::kByte);
}

// Gathers every rank's `mine` (counts[r] bytes from rank r) into one byte
// tensor, rank by rank.
at::Tensor gather_bytes(gang_t* g, const at::Tensor& mine, const std::vector<size_t>& counts,
                        const std::function<void(const Step&)>& run) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  at::Tensor all = at::empty({static_cast<int64_t>(total)}, mine.options());
  // Gang takes no null buffer, even for no bytes.
  static uint8_t none;
  void* send = mine.numel() ? mine.data_ptr() : &none;
  void* recv = total ? all.data_ptr() : &none;
  run([&](gang_work_t** w) {
    return gang_all_gatherv(g, send, static_cast<size_t>(mine.numel()), recv, counts.data(),
                            counts.size(), GANG_UINT8, w);
  });
  return all;
}

}  // namespace

at::Tensor sparse_sum(gang_t* g, const at::Tensor& t, int size,
                      const std::function<void(const Step&)>& run) {
  at::Tensor in = t.coalesce();
  at::Tensor indices = in._indices().contiguous();  // [sparse_dim, nnz], int64
  at::Tensor values = in._values().contiguous();    // [nnz, dense sizes...]
  const int64_t sparse_dim = indices.size(0);
  int64_t entry_elems = 1;  // elements per entry: the dense dimensions'
  for (int64_t d = 1; d < values.dim(); ++d) entry_elems *= values.size(d);

  // How many entries each rank has.
  int64_t mine = in._nnz();
  std::vector<int64_t> nnz(size);
  run([&](gang_work_t** w) { return gang_all_gather(g, &mine, nnz.data(), 1, GANG_INT64, w); });

  std::vector<size_t> index_bytes(size), value_bytes(size);
  for (int r = 0; r < size; ++r) {
    index_bytes[r] = static_cast<size_t>(nnz[r] * sparse_dim) * sizeof(int64_t);
    value_bytes[r] = static_cast<size_t>(nnz[r] * entry_elems) * values.element_size();
  }
  at::Tensor all_indices = gather_bytes(g, bytes_of(indices), index_bytes, run);
  at::Tensor all_values = gather_bytes(g, bytes_of(values), value_bytes, run);

  // Rank r's block: its indices [sparse_dim, nnz_r] and values [nnz_r, ...];
  // the values follow one another, the indices are put side by side, and
  // coalescing adds up the entries ranks share.
  std::vector<at::Tensor> blocks;
  size_t offset = 0;
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    blocks.push_back(all_indices.narrow(0, offset, index_bytes[r])
                         .view(at::kLong)
                         .reshape({sparse_dim, nnz[r]}));
    offset += index_bytes[r];
    total += nnz[r];
  }
  std::vector<int64_t> value_sizes(values.sizes().begin(), values.sizes().end());
  value_sizes[0] = total;
  at::Tensor all = at::sparse_coo_tensor(
      at::cat(blocks, 1), all_values.view(values.scalar_type()).reshape(value_sizes), t.sizes(),
      t.options());
  return all.coalesce();
}

}  // namespace gang_torch

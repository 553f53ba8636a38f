/* mpi_peer: the Open MPI side of bench/compare.sh. Times MPI_Allreduce
 * (float SUM), MPI_Bcast (root 0), MPI_Allgather or MPI_Reduce_scatter_block
 * (float SUM) over sizes, with
 * gang-bench's rules: per size, each rank's median call over -n timed calls
 * after -w warm-up calls; the largest median over ranks is printed, one
 * "size_bytes time_us" line per size on rank 0.
 *   mpirun -np N mpi_peer all_reduce|broadcast|all_gather|reduce_scatter MIN MAX FACTOR ITERS WARMUP
 * Sizes are those of gang-bench: the whole gathered buffer for all_gather,
 * the whole input for reduce_scatter.
 * Both buffers are filled with values first, as gang-bench fills its own. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int rank, size, iters, warmup, i;
  size_t min_b, max_b, bytes;
  double factor;
  const char* coll;
  float *send, *recv;
  double* t;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 7) {
    if (rank == 0) fprintf(stderr, "usage: mpi_peer COLL MIN MAX FACTOR ITERS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  coll = argv[1];
  min_b = strtoull(argv[2], NULL, 10);
  max_b = strtoull(argv[3], NULL, 10);
  factor = atof(argv[4]);
  iters = atoi(argv[5]);
  warmup = atoi(argv[6]);
  send = calloc(max_b / sizeof(float) + 1, sizeof(float));
  recv = calloc(max_b / sizeof(float) + 1, sizeof(float));
  t = calloc((size_t)iters, sizeof *t);
  /* Written, as gang-bench writes its buffers: a calloc'ed buffer never
   * written reads from the kernel's one zero page, always in cache, which
   * made every read of the send buffer look nearly free. */
  for (i = 0; i <= (int)(max_b / sizeof(float)); ++i) {
    send[i] = (float)(rank + 1);
    recv[i] = -1.0f;
  }
  for (bytes = min_b; bytes <= max_b; bytes = (size_t)(bytes * factor)) {
    const int count = (int)(bytes / sizeof(float));
    const int chunk = count / size;
    const int splits = !strcmp(coll, "all_gather") || !strcmp(coll, "reduce_scatter");
    double median, worst;
    if (splits && chunk == 0) continue; /* under an element each */
    for (i = -warmup; i < iters; ++i) {
      const double t0 = MPI_Wtime();
      if (!strcmp(coll, "all_reduce")) {
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (!strcmp(coll, "broadcast")) {
        MPI_Bcast(recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      } else if (!strcmp(coll, "reduce_scatter")) {
        MPI_Reduce_scatter_block(send, recv, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else {
        MPI_Allgather(send, chunk, MPI_FLOAT, recv, chunk, MPI_FLOAT, MPI_COMM_WORLD);
      }
      if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(t, (size_t)iters, sizeof *t, by_value);
    median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    MPI_Reduce(&median, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu %.3f\n", splits ? (size_t)chunk * size * sizeof(float) : bytes, worst);
  }
  free(send);
  free(recv);
  free(t);
  MPI_Finalize();
  return 0;
}

/*
 * test_backend.c - a backend module for the plugin tests, written against
 * gang/gang_backend.h alone, as an outside module would be.
 *
 * "teststore" moves every operation through the gang's rendezvous store: an
 * operation publishes this rank's contribution under "op/<channel>/<seq>/
 * <rank>" and reads the others' keys, so real processes exchange real data
 * through the TCP store with no transport of the module's own. It is slow
 * and simple on purpose. It claims neither host memory nor tagged
 * point-to-point, so gang must open its own control channel beside it and
 * order sends and receives with the collectives. Operations complete inside
 * post (no works).
 *
 * Built once per test case (tests/plugin/CMakeLists.txt) with:
 *   TS_NAME        the backend's name, as in its file name libgang-<name>.so
 *   TS_ABI_OFFSET  added to the table's abi_version (a module of another ABI)
 *   TS_NO_ENTRY    exports the table under another symbol than
 *                  gang_backend_plugin
 *   TS_PROBE_FAILS probe() answers "test probe: no such device"
 */
#define _POSIX_C_SOURCE 200809L

#include <gang/gang_backend.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef TS_NAME
#define TS_NAME "teststore"
#endif
#ifndef TS_ABI_OFFSET
#define TS_ABI_OFFSET 0
#endif

/* The longest a store get waits before abort and the deadline are looked
 * at again: abort must end a blocked operation promptly. */
#define TS_POLL_MS 50

typedef struct ts_counter {
  int peer;
  int tag;
  uint64_t sent;     /* messages sent to peer with tag */
  uint64_t received; /* messages received from peer with tag */
} ts_counter;

typedef struct ts_backend {
  int rank;
  int size;
  const gang_backend_store_t* store; /* NULL for size 1 */
  int aborted; /* set by abort from any thread: __atomic builtins */
  /* post is serialised (gang posts one gang's operations in order anyway);
   * it guards everything below. */
  pthread_mutex_t mu;
  ts_counter* counters;
  size_t ncounters, counters_cap;
  /* This rank's collective keys that peers may still have to read. */
  char** pending;
  size_t npending, pending_cap;
} ts_backend;

/* ---- helpers ------------------------------------------------------------- */

static gang_status_t ts_error(char* err, size_t err_len, gang_status_t s,
                              const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static gang_status_t ts_error(char* err, size_t err_len, gang_status_t s,
                              const char* fmt, ...) {
  va_list ap;
  if (err != NULL && err_len != 0) {
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return s;
}

static int64_t ts_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int ts_aborted(ts_backend* b) {
  return __atomic_load_n(&b->aborted, __ATOMIC_ACQUIRE);
}

static const char* ts_kind_name(int32_t kind) {
  static const char* const names[] = {"all_reduce",
                                      "reduce",
                                      "broadcast",
                                      "all_gather",
                                      "all_gatherv",
                                      "gather",
                                      "scatter",
                                      "reduce_scatter",
                                      "reduce_scatterv",
                                      "all_to_all",
                                      "all_to_allv",
                                      "barrier",
                                      "send",
                                      "recv"};
  if (kind < 0 || (size_t)kind >= sizeof names / sizeof names[0]) return "?";
  return names[kind];
}

/* Bytes per element of every dtype; 0 for an unknown one. */
static size_t ts_dtype_size(int32_t dtype) {
  switch (dtype) {
    case GANG_INT8:
    case GANG_UINT8:
      return 1;
    case GANG_FLOAT16:
    case GANG_BFLOAT16:
      return 2;
    case GANG_INT32:
    case GANG_UINT32:
    case GANG_FLOAT32:
      return 4;
    case GANG_INT64:
    case GANG_UINT64:
    case GANG_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

/* The dtypes ts_reduce handles: all but the 16-bit floats. */
static int ts_reducible(int32_t dtype) {
  return ts_dtype_size(dtype) != 0 && dtype != GANG_FLOAT16 &&
         dtype != GANG_BFLOAT16;
}

static int ts_known_op(int32_t op) {
  return op == GANG_SUM || op == GANG_PROD || op == GANG_MIN ||
         op == GANG_MAX || op == GANG_AVG;
}

/* acc = acc op x, n elements. Signed integers wrap through their unsigned
 * type (no undefined overflow). AVG sums here and divides in ts_finish. */
#define TS_REDUCE_INT(T, U)                   \
  do {                                        \
    T* a = (T*)acc;                           \
    const T* x = (const T*)src;               \
    for (i = 0; i < n; ++i) {                 \
      if (op == GANG_SUM || op == GANG_AVG) { \
        a[i] = (T)((U)a[i] + (U)x[i]);        \
      } else if (op == GANG_PROD) {           \
        a[i] = (T)((U)a[i] * (U)x[i]);        \
      } else if (op == GANG_MIN) {            \
        if (x[i] < a[i]) a[i] = x[i];         \
      } else if (x[i] > a[i]) {               \
        a[i] = x[i];                          \
      }                                       \
    }                                         \
  } while (0)

#define TS_REDUCE_FLOAT(T)                    \
  do {                                        \
    T* a = (T*)acc;                           \
    const T* x = (const T*)src;               \
    for (i = 0; i < n; ++i) {                 \
      if (op == GANG_SUM || op == GANG_AVG) { \
        a[i] = a[i] + x[i];                   \
      } else if (op == GANG_PROD) {           \
        a[i] = a[i] * x[i];                   \
      } else if (op == GANG_MIN) {            \
        if (x[i] < a[i]) a[i] = x[i];         \
      } else if (x[i] > a[i]) {               \
        a[i] = x[i];                          \
      }                                       \
    }                                         \
  } while (0)

static void ts_reduce(void* acc, const void* src, size_t n, int32_t dtype,
                      int32_t op) {
  size_t i;
  switch (dtype) {
    case GANG_INT8:
      TS_REDUCE_INT(int8_t, uint8_t);
      break;
    case GANG_UINT8:
      TS_REDUCE_INT(uint8_t, uint8_t);
      break;
    case GANG_INT32:
      TS_REDUCE_INT(int32_t, uint32_t);
      break;
    case GANG_UINT32:
      TS_REDUCE_INT(uint32_t, uint32_t);
      break;
    case GANG_INT64:
      TS_REDUCE_INT(int64_t, uint64_t);
      break;
    case GANG_UINT64:
      TS_REDUCE_INT(uint64_t, uint64_t);
      break;
    case GANG_FLOAT32:
      TS_REDUCE_FLOAT(float);
      break;
    case GANG_FLOAT64:
      TS_REDUCE_FLOAT(double);
      break;
    default:
      break;
  }
}

/* AVG: the (wrapped) sum divided by the size; integers truncate toward
 * zero, as C's division does. */
#define TS_DIVIDE(T)                                    \
  do {                                                  \
    T* a = (T*)acc;                                     \
    for (i = 0; i < n; ++i) a[i] = (T)(a[i] / (T)size); \
  } while (0)

static void ts_finish(void* acc, size_t n, int32_t dtype, int32_t op,
                      int size) {
  size_t i;
  if (op != GANG_AVG) return;
  switch (dtype) {
    case GANG_INT8:
      TS_DIVIDE(int8_t);
      break;
    case GANG_UINT8:
      TS_DIVIDE(uint8_t);
      break;
    case GANG_INT32:
      TS_DIVIDE(int32_t);
      break;
    case GANG_UINT32:
      TS_DIVIDE(uint32_t);
      break;
    case GANG_INT64:
      TS_DIVIDE(int64_t);
      break;
    case GANG_UINT64:
      TS_DIVIDE(uint64_t);
      break;
    case GANG_FLOAT32:
      TS_DIVIDE(float);
      break;
    case GANG_FLOAT64:
      TS_DIVIDE(double);
      break;
    default:
      break;
  }
}

/* ---- the store ----------------------------------------------------------- */

/* Waits for key until deadline_ns, in slices of at most TS_POLL_MS, so
 * abort and the deadline are noticed while a peer is late. */
static gang_status_t ts_get(ts_backend* b, const char* key, int64_t deadline_ns,
                            const char* what, void** data, size_t* len,
                            char* err, size_t err_len) {
  for (;;) {
    int64_t left_ns, slice_ms;
    gang_status_t s;
    if (ts_aborted(b)) {
      return ts_error(err, err_len, GANG_ERR_ABORTED,
                      "%s: the backend was aborted", what);
    }
    left_ns = deadline_ns - ts_now_ns();
    if (left_ns <= 0) {
      return ts_error(err, err_len, GANG_ERR_TIMEOUT,
                      "%s: key \"%s\" did not appear before the deadline", what,
                      key);
    }
    slice_ms = left_ns / 1000000 + (left_ns % 1000000 != 0);
    if (slice_ms > TS_POLL_MS) slice_ms = TS_POLL_MS;
    s = b->store->get(b->store->ctx, key, slice_ms, data, len, err, err_len);
    if (s != GANG_ERR_TIMEOUT) return s;
  }
}

/* Publishes this rank's contribution to a collective and remembers the key,
 * which peers may still read. */
static gang_status_t ts_publish(ts_backend* b, const char* key,
                                const void* data, size_t len, char* err,
                                size_t err_len) {
  char* copy;
  gang_status_t s = b->store->set(b->store->ctx, key, data, len, err, err_len);
  if (s != GANG_OK) return s;
  if (b->npending == b->pending_cap) {
    size_t cap = b->pending_cap ? 2 * b->pending_cap : 8;
    char** grown = (char**)realloc(b->pending, cap * sizeof *grown);
    if (grown == NULL) {
      return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
    }
    b->pending = grown;
    b->pending_cap = cap;
  }
  copy = strdup(key);
  if (copy == NULL) {
    return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
  }
  b->pending[b->npending++] = copy;
  return GANG_OK;
}

/* Called once this rank has read every peer's key of the latest collective:
 * each peer published it only after finishing its earlier operations, so
 * the keys this rank published before it have all been read. Deleting them
 * is best effort; a failure only leaves garbage in the store. */
static void ts_collect(ts_backend* b) {
  char scratch[256];
  size_t i;
  if (b->npending == 0) return;
  for (i = 0; i + 1 < b->npending; ++i) {
    b->store->remove(b->store->ctx, b->pending[i], scratch, sizeof scratch);
    free(b->pending[i]);
  }
  b->pending[0] = b->pending[b->npending - 1];
  b->npending = 1;
}

static void ts_op_key(char* key, size_t n, const gang_backend_op_t* op,
                      int rank) {
  snprintf(key, n, "op/%d/%llu/%d", (int)op->channel,
           (unsigned long long)op->seq, rank);
}

/* Reads rank r's contribution to op, which must be `bytes` long. */
static gang_status_t ts_read(ts_backend* b, const gang_backend_op_t* op, int r,
                             size_t bytes, void** data, char* err,
                             size_t err_len) {
  char key[96], what[96];
  size_t len = 0;
  gang_status_t s;
  ts_op_key(key, sizeof key, op, r);
  snprintf(what, sizeof what, "%s (channel %d, seq %llu)",
           ts_kind_name(op->kind), (int)op->channel,
           (unsigned long long)op->seq);
  s = ts_get(b, key, op->deadline_ns, what, data, &len, err, err_len);
  if (s != GANG_OK) return s;
  if (len != bytes) {
    free(*data);
    *data = NULL;
    return ts_error(err, err_len, GANG_ERR_MISMATCH,
                    "%s: rank %d contributed %zu bytes, rank %d %zu", what, r,
                    len, b->rank, bytes);
  }
  return GANG_OK;
}

/* ---- operations ---------------------------------------------------------- */

static gang_status_t ts_all_reduce(ts_backend* b, const gang_backend_op_t* op,
                                   char* err, size_t err_len) {
  const size_t bytes = op->count * ts_dtype_size(op->dtype);
  char key[96];
  void* acc;
  gang_status_t s = GANG_OK;
  int r;
  if (!ts_reducible(op->dtype) || !ts_known_op(op->op)) {
    return ts_error(err, err_len, GANG_ERR_UNSUPPORTED,
                    "all_reduce of dtype %d with op %d is not implemented",
                    (int)op->dtype, (int)op->op);
  }
  acc = malloc(bytes != 0 ? bytes : 1);
  if (acc == NULL) {
    return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
  }
  if (b->size > 1) {
    ts_op_key(key, sizeof key, op, b->rank);
    s = ts_publish(b, key, op->send, bytes, err, err_len);
  }
  /* Every rank reduces in rank order, so all get the same bits. send stays
   * intact until the end even in place: only acc is written. */
  for (r = 0; s == GANG_OK && r < b->size; ++r) {
    void* peer = NULL;
    const void* src = op->send;
    if (r != b->rank) {
      s = ts_read(b, op, r, bytes, &peer, err, err_len);
      if (s != GANG_OK) break;
      src = peer;
    }
    if (bytes != 0) {
      if (r == 0) {
        memcpy(acc, src, bytes);
      } else {
        ts_reduce(acc, src, op->count, op->dtype, op->op);
      }
    }
    free(peer);
  }
  if (s == GANG_OK) {
    ts_finish(acc, op->count, op->dtype, op->op, b->size);
    if (bytes != 0) memcpy(op->recv, acc, bytes);
    if (b->size > 1) ts_collect(b);
  }
  free(acc);
  return s;
}

static gang_status_t ts_broadcast(ts_backend* b, const gang_backend_op_t* op,
                                  char* err, size_t err_len) {
  const size_t bytes = op->count * ts_dtype_size(op->dtype);
  char key[96];
  void* data = NULL;
  gang_status_t s;
  if (b->size == 1) return GANG_OK;
  if (b->rank == op->root) {
    ts_op_key(key, sizeof key, op, b->rank);
    return ts_publish(b, key, op->recv, bytes, err, err_len);
  }
  s = ts_read(b, op, op->root, bytes, &data, err, err_len);
  if (s != GANG_OK) return s;
  if (bytes != 0) memcpy(op->recv, data, bytes);
  free(data);
  return GANG_OK;
}

/* ALL_GATHER and BARRIER (a gather of nothing). */
static gang_status_t ts_all_gather(ts_backend* b, const gang_backend_op_t* op,
                                   char* err, size_t err_len) {
  const size_t bytes = op->count * ts_dtype_size(op->dtype);
  char* recv = (char*)op->recv;
  char key[96];
  gang_status_t s = GANG_OK;
  int r;
  /* In place the own chunk already is where it belongs: memmove is a no-op. */
  if (bytes != 0) memmove(recv + (size_t)b->rank * bytes, op->send, bytes);
  if (b->size == 1) return GANG_OK;
  ts_op_key(key, sizeof key, op, b->rank);
  s = ts_publish(b, key, op->send, bytes, err, err_len);
  for (r = 0; s == GANG_OK && r < b->size; ++r) {
    void* data = NULL;
    if (r == b->rank) continue;
    s = ts_read(b, op, r, bytes, &data, err, err_len);
    if (s == GANG_OK && bytes != 0)
      memcpy(recv + (size_t)r * bytes, data, bytes);
    free(data);
  }
  if (s == GANG_OK) ts_collect(b);
  return s;
}

/* The message counter of (peer, tag); NULL when out of memory. */
static ts_counter* ts_counter_of(ts_backend* b, int peer, int tag) {
  size_t i;
  for (i = 0; i < b->ncounters; ++i) {
    if (b->counters[i].peer == peer && b->counters[i].tag == tag) {
      return &b->counters[i];
    }
  }
  if (b->ncounters == b->counters_cap) {
    size_t cap = b->counters_cap ? 2 * b->counters_cap : 8;
    ts_counter* grown = (ts_counter*)realloc(b->counters, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    b->counters = grown;
    b->counters_cap = cap;
  }
  b->counters[b->ncounters].peer = peer;
  b->counters[b->ncounters].tag = tag;
  b->counters[b->ncounters].sent = 0;
  b->counters[b->ncounters].received = 0;
  return &b->counters[b->ncounters++];
}

/* A send is buffered in the store: it completes at once, as MPI's eager
 * sends do, so a group needs no ordering of its sends and receives. */
static gang_status_t ts_send(ts_backend* b, const gang_backend_op_t* op,
                             char* err, size_t err_len) {
  const size_t bytes = op->count * ts_dtype_size(op->dtype);
  char key[96];
  ts_counter* c = ts_counter_of(b, op->root, op->tag);
  if (c == NULL) {
    return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
  }
  snprintf(key, sizeof key, "p2p/%d/%d/%d/%llu", b->rank, (int)op->root,
           (int)op->tag, (unsigned long long)c->sent++);
  return b->store->set(b->store->ctx, key, op->send, bytes, err, err_len);
}

static gang_status_t ts_recv(ts_backend* b, const gang_backend_op_t* op,
                             char* err, size_t err_len) {
  const size_t bytes = op->count * ts_dtype_size(op->dtype);
  char key[96], what[96], scratch[256];
  void* data = NULL;
  size_t len = 0;
  gang_status_t s;
  ts_counter* c = ts_counter_of(b, op->root, op->tag);
  if (c == NULL) {
    return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
  }
  snprintf(key, sizeof key, "p2p/%d/%d/%d/%llu", (int)op->root, b->rank,
           (int)op->tag, (unsigned long long)c->received++);
  snprintf(what, sizeof what, "recv from rank %d, tag %d", (int)op->root,
           (int)op->tag);
  s = ts_get(b, key, op->deadline_ns, what, &data, &len, err, err_len);
  if (s != GANG_OK) return s;
  if (len != bytes) {
    free(data);
    return ts_error(err, err_len, GANG_ERR_MISMATCH,
                    "%s: rank %d sent %zu bytes, this receive takes %zu", what,
                    (int)op->root, len, bytes);
  }
  if (bytes != 0) memcpy(op->recv, data, bytes);
  free(data);
  /* Only this rank reads it. */
  b->store->remove(b->store->ctx, key, scratch, sizeof scratch);
  return GANG_OK;
}

static gang_status_t ts_run(ts_backend* b, const gang_backend_op_t* op,
                            char* err, size_t err_len) {
  switch (op->kind) {
    case GANG_BACKEND_OP_ALL_REDUCE:
      return ts_all_reduce(b, op, err, err_len);
    case GANG_BACKEND_OP_BROADCAST:
      return ts_broadcast(b, op, err, err_len);
    case GANG_BACKEND_OP_ALL_GATHER:
    case GANG_BACKEND_OP_BARRIER:
      return ts_all_gather(b, op, err, err_len);
    case GANG_BACKEND_OP_SEND:
      return ts_send(b, op, err, err_len);
    case GANG_BACKEND_OP_RECV:
      return ts_recv(b, op, err, err_len);
    default:
      return ts_error(err, err_len, GANG_ERR_UNSUPPORTED,
                      "%s is not implemented by this test module",
                      ts_kind_name(op->kind));
  }
}

/* ---- the table ----------------------------------------------------------- */

static int ts_probe(char* why, size_t why_len) {
#ifdef TS_PROBE_FAILS
  snprintf(why, why_len, "test probe: no such device");
  return 1;
#else
  (void)why;
  (void)why_len;
  return 0;
#endif
}

static gang_status_t ts_create(const gang_backend_config_t* config,
                               void** backend, char* err, size_t err_len) {
  ts_backend* b;
  if (config->struct_size < sizeof *config) {
    return ts_error(err, err_len, GANG_ERR_INTERNAL,
                    "the config is %zu bytes, this module needs %zu",
                    config->struct_size, sizeof *config);
  }
  if (config->size > 1 && config->store == NULL) {
    return ts_error(err, err_len, GANG_ERR_INTERNAL,
                    "a gang of size %d came without a store",
                    (int)config->size);
  }
  if (config->store != NULL) {
    /* Not needed to rendezvous, but it proves add works across the C
     * boundary. */
    int64_t joined = 0;
    gang_status_t s = config->store->add(config->store->ctx, "ts/joined", 1,
                                         &joined, err, err_len);
    if (s != GANG_OK) return s;
    if (joined < 1) {
      return ts_error(err, err_len, GANG_ERR_STORE,
                      "store add returned %lld after adding 1",
                      (long long)joined);
    }
  }
  b = (ts_backend*)calloc(1, sizeof *b);
  if (b == NULL) {
    return ts_error(err, err_len, GANG_ERR_NO_MEMORY, "out of memory");
  }
  if (pthread_mutex_init(&b->mu, NULL) != 0) {
    free(b);
    return ts_error(err, err_len, GANG_ERR_SYSTEM, "pthread_mutex_init failed");
  }
  b->rank = config->rank;
  b->size = config->size;
  b->store = config->store;
  *backend = b;
  return GANG_OK;
}

static void ts_destroy(void* backend) {
  ts_backend* b = (ts_backend*)backend;
  size_t i;
  /* Local: the keys stay in the store rather than making destroy wait. */
  for (i = 0; i < b->npending; ++i) free(b->pending[i]);
  free(b->pending);
  free(b->counters);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

static int ts_supports(void* backend, gang_op_t op, gang_dtype_t dtype) {
  (void)backend;
  return ts_known_op(op) && ts_reducible(dtype);
}

static gang_status_t ts_post(void* backend, const gang_backend_op_t* ops,
                             size_t nops, void** work, char* err,
                             size_t err_len) {
  ts_backend* b = (ts_backend*)backend;
  gang_status_t s = GANG_OK;
  size_t i;
  int pass;
  *work = NULL;
  if (ops->struct_size < sizeof *ops) {
    return ts_error(err, err_len, GANG_ERR_INTERNAL,
                    "operations are %zu bytes, this module needs %zu",
                    ops->struct_size, sizeof *ops);
  }
  if (ts_aborted(b)) {
    return ts_error(err, err_len, GANG_ERR_ABORTED, "the backend was aborted");
  }
  pthread_mutex_lock(&b->mu);
  /* A group runs its sends first: they never block, so both sides of an
   * exchange can then receive. */
  for (pass = 0; pass < 2 && s == GANG_OK; ++pass) {
    for (i = 0; i < nops && s == GANG_OK; ++i) {
      const gang_backend_op_t* op = gang_backend_op_at(ops, i);
      const int is_send = op->kind == GANG_BACKEND_OP_SEND;
      if (is_send == (pass == 0)) s = ts_run(b, op, err, err_len);
    }
  }
  pthread_mutex_unlock(&b->mu);
  return s;
}

/* post hands out no works, so these are never called with one. */
static gang_status_t ts_test(void* work, char* err, size_t err_len) {
  (void)work;
  return ts_error(err, err_len, GANG_ERR_INTERNAL,
                  "this module hands out no works");
}

static gang_status_t ts_wait(void* work, int64_t until_ns, char* err,
                             size_t err_len) {
  (void)work;
  (void)until_ns;
  return ts_error(err, err_len, GANG_ERR_INTERNAL,
                  "this module hands out no works");
}

static void ts_work_free(void* work) { (void)work; }

static void ts_abort(void* backend) {
  ts_backend* b = (ts_backend*)backend;
  __atomic_store_n(&b->aborted, 1, __ATOMIC_RELEASE);
}

static const gang_backend_t ts_table = {
    .struct_size = sizeof(gang_backend_t),
    .abi_version = GANG_BACKEND_ABI_VERSION + TS_ABI_OFFSET,
    .device_types = 1u << GANG_DEVICE_CPU,
    .name = TS_NAME,
    .priority = -1, /* never "auto": only asked for by name */
    .flags = 0,     /* device-like: no host memory, no tagged p2p */
    .probe = ts_probe,
    .create = ts_create,
    .destroy = ts_destroy,
    .supports = ts_supports,
    .post = ts_post,
    .test = ts_test,
    .wait = ts_wait,
    .work_free = ts_work_free,
    .poll_error = NULL,
    .finalize = NULL,
    .abort = ts_abort,
};

#ifdef TS_NO_ENTRY
/* The table under a name gang does not look for. */
GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin_v0(void);
GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin_v0(void) {
  return &ts_table;
}
#else
GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin(void) {
  return &ts_table;
}
#endif

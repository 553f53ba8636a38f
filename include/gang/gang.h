/*
 * gang.h - process groups ("gangs") for distributed training.
 *
 * Introduction
 * ============
 * A gang is a set of processes, each with a rank in [0, size), that run
 * collectives together: all-reduce, all-gather(v), reduce-scatter(v),
 * broadcast, gather, scatter, all-to-all(v), send/recv, barrier, and byte
 * payloads of any size. One gang is created from a rendezvous (a store every
 * rank can reach); further gangs are split from it.
 *
 * This header is the whole public surface. It is C99 and C++, includes no
 * CUDA or C++ header, and every exported name starts with gang_ or gangs_.
 *
 * Reading order, simple to advanced: version, status and errors, types,
 * options, stores, creating gangs, sub-gangs, collectives, bytes, work.
 *
 * Conventions
 * -----------
 * - Every function that can fail returns gang_status_t: 0 is success, 1 is
 *   "in progress", negative values are errors. A failing call stores a
 *   message for this thread, read with gang_last_error().
 * - Element counts, byte counts and array lengths are size_t; ranks, sizes,
 *   colors, keys and tags are int; flags are int (nonzero is true).
 * - Handles are opaque. Handle out-parameters are named `out`; the
 *   asynchronous out-parameter of a collective is always `work`.
 * - *_destroy(NULL) is a no-op returning GANG_OK. Strings the library returns
 *   are owned by it. Memory the library allocates for the caller is freed with
 *   gang_free(), even when its length is 0.
 * - Every function may be called from any thread. On one gang, operations are
 *   matched across ranks by issue order: a program that issues on one gang
 *   from several threads must order them the same way on every rank (one
 *   thread per gang, or a lock around a sequence the ranks agree on). Where
 *   the orders differ, the operations that meet differ in what they are
 *   (call, dtype, op, count, root) or they do not: the first case is
 *   GANG_ERR_MISMATCH on every rank, never a wrong result; the second cannot
 *   be told from a correct program by gang (two all-reduces of 4 floats
 *   swapped between threads add the wrong buffers), not even with
 *   GANG_DEBUG=detail, which compares the same descriptions. Give each
 *   thread a gang of its own (gang_split) when threads must run
 *   collectives independently.
 *
 * For other languages (FFI: ctypes, JNA/FFM, LuaJIT, Rust, Free Pascal)
 * -------------------------------------------------------------------
 * - Load libgang.so.0 and bind the functions by name (with dlvsym, the
 *   version node: "GANG_0.1" for the first release's; GANG_VERSION_NUMBER
 *   says which release the header is). gang_status_t, the enums and int
 *   are 32-bit signed; size_t and pointers are the platform's.
 * - Structs grow at their end and carry their own size: fill them with the
 *   *_init_v functions, passing the sizeof your binding declares
 *   (gang_options_init_v(&o, sizeof o)); a library newer than your
 *   declaration treats the fields you do not know as their defaults.
 * - Every function may be called from any thread (above); handles may move
 *   between threads; gang_last_error() is per thread.
 * - Callbacks you pass (a store's, gang_store_create_callbacks) may run on
 *   threads gang starts, not only on the calling one, and may run
 *   concurrently: they must not assume the caller's thread state (a
 *   runtime's attached thread, its exception handlers).
 * - Reductions run with floating-point exceptions masked and give the
 *   caller's environment back unchanged: a host that unmasks them (Free
 *   Pascal does by default) gets inf and NaN from an overflowing sum, not
 *   SIGFPE.
 * - Examples for each language: examples/ffi/.
 */
#ifndef GANG_H
#define GANG_H

#include <stddef.h>
#include <stdint.h>

#include "gang/gang_export.h"
#include "gang/gang_status.h"
#include "gang/gang_version.h"

GANG_BEGIN_DECLS

/* ========================================================================
 * Version
 * ======================================================================== */

/** The library's GANG_VERSION_NUMBER (MAJOR*10000 + MINOR*100 + PATCH), which
 *  may differ from the header's when an application runs against a newer
 *  library. Never fails. */
GANG_API unsigned gang_version_number(void);

/** The library's version as "MAJOR.MINOR.PATCH"; a static string. */
GANG_API const char* gang_version_string(void);

/* ========================================================================
 * Status and errors
 * ======================================================================== */

/* GANG_STATUS_MAP (gang_status.h), X(NAME, value, message), generates the
 * enum, gang_status_name() and gang_status_string(). The values:
 *
 *   GANG_OK                     =   0  success
 *   GANG_IN_PROGRESS            =   1  operation in progress (not an error)
 *   GANG_ERR_INVALID_ARGUMENT   =  -1  a bad argument; the gang is unchanged
 *   GANG_ERR_UNSUPPORTED        =  -2  not supported by this backend or build
 *   GANG_ERR_UNAVAILABLE        =  -3  backend or device unavailable
 *   GANG_ERR_TIMEOUT            =  -4  the gang's timeout passed
 *   GANG_ERR_PEER_LOST          =  -5  a peer died or its connection broke
 *   GANG_ERR_MISMATCH           =  -6  ranks called different operations
 *   GANG_ERR_ABORTED            =  -7  the gang was aborted or had failed
 *   GANG_ERR_STORE              =  -8  the rendezvous store failed
 *   GANG_ERR_NO_MEMORY          =  -9  out of memory
 *   GANG_ERR_SYSTEM             = -10  an operating-system or I/O error
 *   GANG_ERR_INTERNAL           = -11  a bug in gang
 *
 * After TIMEOUT, PEER_LOST, MISMATCH or ABORTED the gang has failed: its
 * later calls return GANG_ERR_ABORTED (gang_shrink makes a new one of the
 * survivors). */
typedef enum gang_status {
#define GANG_STATUS_ENUM_(name, value, msg) name = value,
  GANG_STATUS_MAP(GANG_STATUS_ENUM_)
#undef GANG_STATUS_ENUM_
  GANG_STATUS_FORCE_32BIT = 0x7fffffff
} gang_status_t;

/** The status's name, e.g. "GANG_ERR_TIMEOUT"; "GANG_STATUS_UNKNOWN" for a
 *  value outside the list. Never NULL. */
GANG_API const char* gang_status_name(gang_status_t status);

/** A short description, e.g. "operation timed out". Never NULL. */
GANG_API const char* gang_status_string(gang_status_t status);

/** The detailed message of the last failed call on this thread, e.g.
 *  "gang_broadcast: root 7 is out of range for a gang of size 4"; "" if none.
 *  Failing calls set it, successful calls leave it. Valid until the next gang
 *  call on this thread. Never NULL. */
GANG_API const char* gang_last_error(void);

/** Copies the last error into buf: at most len-1 bytes and a NUL (nothing if
 *  len is 0). Returns the message's full length, without the NUL. */
GANG_API size_t gang_last_error_copy(char* buf, size_t len);

/* ========================================================================
 * Types
 * ======================================================================== */

/** Element types. Append-only. */
typedef enum gang_dtype {
  GANG_INT8 = 0,
  GANG_UINT8 = 1,
  GANG_INT32 = 2,
  GANG_UINT32 = 3,
  GANG_INT64 = 4,
  GANG_UINT64 = 5,
  GANG_FLOAT16 = 6,  /* IEEE 754 binary16 */
  GANG_BFLOAT16 = 7, /* the upper half of a float32 */
  GANG_FLOAT32 = 8,
  GANG_FLOAT64 = 9,
  GANG_BOOL = 10, /* one byte, 0 or 1 (any nonzero byte reads as 1): SUM and
                     MAX are "or", PROD and MIN "and", AVG is unsupported */
  GANG_INT16 = 11,
  GANG_DTYPE_FORCE_32BIT = 0x7fffffff
} gang_dtype_t;

/** Reduction operations. Append-only.
 *
 *  Floating reductions compute each partial result in at least float32 and
 *  round it to the dtype (nearest even). Integer SUM and PROD wrap modulo
 *  2^bits. AVG is for floating types only: AVG of an integer type or bool is
 *  GANG_ERR_UNSUPPORTED on every backend (gang_supports says 0), as torch
 *  refuses it, rather than a truncated mean; use SUM and divide. AVG of
 *  floats on CPU backends is the sum divided by the size. MIN and MAX with NaN are backend-defined. One all-reduce gives
 *  bitwise-identical results on every rank. */
typedef enum gang_op {
  GANG_SUM = 0,
  GANG_PROD = 1,
  GANG_MIN = 2,
  GANG_MAX = 3,
  GANG_AVG = 4,
  GANG_OP_FORCE_32BIT = 0x7fffffff
} gang_op_t;

/** Where a gang's buffers live. Append-only. */
typedef enum gang_device_type {
  GANG_DEVICE_CPU = 0,
  GANG_DEVICE_CUDA = 1,
  GANG_DEVICE_TYPE_FORCE_32BIT = 0x7fffffff
} gang_device_type_t;

/** What a wait of a CUDA gang's operation waits for (see
 *  gang_set_cuda_completion). */
typedef enum gang_cuda_completion {
  /* The host, until the operation has ended on the device (the default). */
  GANG_CUDA_COMPLETION_HOST = 0,
  /* Only that the caller's stream is ordered after the operation, as NCCL
   * and torch.distributed do: the call returns without waiting for the
   * device. */
  GANG_CUDA_COMPLETION_STREAM = 1,
  GANG_CUDA_COMPLETION_FORCE_32BIT = 0x7fffffff
} gang_cuda_completion_t;

/** The size of one element of dtype in bytes; 0 for an invalid dtype. */
GANG_API size_t gang_dtype_size(gang_dtype_t dtype);

/* ========================================================================
 * Handles
 * ======================================================================== */

/** A group of processes with a rank each (a communicator). */
typedef struct gang_s gang_t;
/** A rendezvous key-value store. */
typedef struct gang_store_s gang_store_t;
/** An operation in flight. */
typedef struct gang_work_s gang_work_t;

/* ========================================================================
 * Stores
 *
 * A tcp:// store server defends itself, so that a port reachable from a
 * network is not an open door:
 *
 *  - It listens on exactly the host of its url: tcp://127.0.0.1:P serves
 *    this machine only, tcp://node7:P every address node7 resolves to here,
 *    tcp://0.0.0.0:P (or tcp://[::]:P) every interface.
 *  - With a token (GANG_STORE_TOKEN, or ?token=T in the url, which wins),
 *    every connection must present it before anything else; a connection
 *    that does not, or presents another, is refused and closed, and nothing
 *    else is affected. Clients present the token of their own url or
 *    environment. A token is at most 256 letters, digits and -._~+/=; it
 *    never appears in messages (a url is shown with "token=***"). gangrun
 *    makes one per job and hands it to its ranks in GANG_STORE_TOKEN.
 *  - It enforces limits, each read from the environment when the store is
 *    opened (unset or empty: the default):
 *      GANG_STORE_MAX_KEY_BYTES       longest key (default and most 4096)
 *      GANG_STORE_MAX_VALUE_BYTES     largest value (default and most 1 GiB)
 *      GANG_STORE_MAX_TOTAL_BYTES     bytes the server holds: keys and
 *                                     values (plus 128 bytes per key), the
 *                                     sizes announced by sets still arriving,
 *                                     values replies still hold (default
 *                                     2147483648)
 *      GANG_STORE_MAX_REQUEST_BYTES   key plus value of one request (default:
 *                                     the key and value limits summed)
 *      GANG_STORE_MAX_CONNECTIONS     open connections (default 1024; 4 per
 *                                     rank for a server of gangrun or rank 0
 *                                     that serves more than 256 ranks)
 *      GANG_STORE_IDLE_TIMEOUT_MS     an idle connection is closed after it
 *                                     (default 600000; clients reconnect)
 *      GANG_STORE_REQUEST_TIMEOUT_MS  a request half-sent, a reply not read,
 *                                     or a connection that has not presented
 *                                     the token, this long: closed (default
 *                                     30000)
 *    A request over a limit is answered with a message saying which and its
 *    connection is closed: the caller gets GANG_ERR_STORE with that message.
 *    A full store still serves gets, waits, deletes and adds to existing
 *    counters. Bytes of a request are held only as they arrive. A malformed
 *    value of a variable is GANG_ERR_INVALID_ARGUMENT naming it.
 * ======================================================================== */

/** Opens a rendezvous store.
 *
 *  url: "tcp://host:port[?token=T]" (is_server nonzero: serve on host:port
 *  from a thread of this process, port 0 picks a free one, see
 *  gang_store_port; is_server 0: a client; see above for the host, the
 *  token and the limits), "torch://host:port" (a client of PyTorch's
 *  TCPStore, such as the one torchrun's agent serves; both protocol
 *  generations, PyTorch 2.2 and later (validation handshake; values up to
 *  8 MiB) and 1.x to 2.1, chosen at connect; keys are stored as
 *  "/gang/<key>", which PyTorch programs see as "gang/<key>"; is_server
 *  must be 0), "redis://host:port[/prefix]" (keys
 *  kept in a Redis server without a password, each as prefix + key; gets and
 *  waits poll), "file:///dir" (one file per key in dir, created if missing)
 *  or "memory://name" (shared by every store of that name in this process).
 *  timeout_ms bounds every wait of the store (connecting included); <= 0
 *  means GANG_TIMEOUT_MS, else 600000.
 *
 *  A server also acts as a client of itself, so every call below works on it.
 *  The handle is thread-safe.
 *
 *  Returns GANG_ERR_INVALID_ARGUMENT (bad url, token or out, a malformed
 *  GANG_STORE_* variable), GANG_ERR_SYSTEM (the port is in use, the host is
 *  not an address of this machine, the directory cannot be made),
 *  GANG_ERR_STORE (the server cannot be reached before the timeout, or
 *  refuses this client's token or lack of one). */
GANG_API gang_status_t gang_store_create(const char* url, int is_server,
                                         int64_t timeout_ms,
                                         gang_store_t** out);

/** A store implemented by the caller, as callbacks: for a rendezvous
 *  through another library's store (torch.distributed's, say), with no port
 *  or server of gang's own. Keys are non-empty strings; values bytes.
 *
 *  Threads: every callback may be called from any thread, concurrently,
 *  until release. Each returns GANG_OK or an error status
 *  (GANG_ERR_TIMEOUT when a wait ran out, GANG_ERR_STORE when the store
 *  failed), and may write a NUL-terminated message of at most err_len bytes
 *  into err, which gang reports naming the call and the key. No callback may
 *  let an exception or a longjmp out.
 *
 *  Ownership: gang copies the struct; ctx is the caller's, handed back to
 *  every callback, and release(ctx) (if set) runs once when the store is
 *  gone: after gang_store_destroy and after every gang made with the store
 *  is destroyed. Added in 0.2. */
typedef struct gang_store_callbacks {
  size_t struct_size; /* sizeof(gang_store_callbacks_t) */
  void* ctx;
  /** Sets key to the n bytes at value (NULL when n is 0). */
  gang_status_t (*set)(void* ctx, const char* key, const void* value, size_t n,
                       char* err, size_t err_len);
  /** Waits up to timeout_ms (> 0) for key; then *value is a copy of its
   *  value, allocated with malloc (gang frees it with free(); non-NULL even
   *  for an empty value), and *n its length. GANG_ERR_TIMEOUT if it did not
   *  appear in time. */
  gang_status_t (*get)(void* ctx, const char* key, int64_t timeout_ms,
                       void** value, size_t* n, char* err, size_t err_len);
  /** Adds delta to the decimal integer at key (missing: 0); *out = the sum. */
  gang_status_t (*add)(void* ctx, const char* key, int64_t delta,
                       int64_t* out, char* err, size_t err_len);
  /** Deletes key; a missing key is not an error. */
  gang_status_t (*remove)(void* ctx, const char* key, char* err,
                          size_t err_len);
  /** Optional (NULL): *exist = 1 if every key exists now, else 0, without
   *  waiting. */
  gang_status_t (*check)(void* ctx, const char* const* keys, size_t nkeys,
                         int* exist, char* err, size_t err_len);
  /** Optional (NULL): waits up to timeout_ms until every key exists.
   *  Without it gang polls check, or waits with get key by key. */
  gang_status_t (*wait)(void* ctx, const char* const* keys, size_t nkeys,
                        int64_t timeout_ms, char* err, size_t err_len);
  /** Optional (NULL): called once, when the store is gone. */
  void (*release)(void* ctx);
} gang_store_callbacks_t;

/** Makes a store of callbacks (gang_store_callbacks_t), usable wherever a
 *  gang_store_t is: gang_options_t.store, and every gang_store_* call.
 *  timeout_ms bounds its waits as gang_store_create's does. Returns
 *  GANG_ERR_INVALID_ARGUMENT naming what is missing (callbacks or out NULL,
 *  a struct_size too small, set, get, add or remove NULL). Added in 0.2. */
GANG_API gang_status_t gang_store_create_callbacks(
    const gang_store_callbacks_t* callbacks, int64_t timeout_ms,
    gang_store_t** out);

/** Closes the store; a server stops serving. NULL is a no-op. */
GANG_API gang_status_t gang_store_destroy(gang_store_t* store);

/** The TCP port a tcp:// store serves or talks to, or a torch:// or redis://
 *  store talks to; -1 for other stores. */
GANG_API int gang_store_port(const gang_store_t* store);

/** Sets key to the n bytes at value (value may be NULL when n is 0),
 *  replacing any earlier value. Keys are non-empty, at most 4096 bytes
 *  (GANG_STORE_MAX_KEY_BYTES), and values at most 1 GiB
 *  (GANG_STORE_MAX_VALUE_BYTES).
 *
 *  n is checked against the value limit before any byte of value is read:
 *  a larger n (SIZE_MAX included) is GANG_ERR_INVALID_ARGUMENT naming n.
 *  GANG_ERR_STORE when a tcp:// server refuses the set (over its limits,
 *  the store full), with the server's reason. */
GANG_API gang_status_t gang_store_set(gang_store_t* store, const char* key,
                                      const void* value, size_t n);

/** Waits, up to the store's timeout, for key and returns a fresh copy of its
 *  value in *value (free with gang_free) and its length in *n.
 *  Returns GANG_ERR_TIMEOUT if the key did not appear in time. */
GANG_API gang_status_t gang_store_get(gang_store_t* store, const char* key,
                                      void** value, size_t* n);

/** Atomically adds delta to the integer stored at key (a missing key counts as
 *  0) and returns the new value in *out (out may be NULL). The value is stored
 *  as a decimal string, so gang_store_get reads it as text. */
GANG_API gang_status_t gang_store_add(gang_store_t* store, const char* key,
                                      int64_t delta, int64_t* out);

/** Waits, up to the store's timeout, until all nkeys keys exist.
 *  Returns GANG_ERR_TIMEOUT naming a missing key if they do not. */
GANG_API gang_status_t gang_store_wait(gang_store_t* store,
                                       const char* const* keys, size_t nkeys);

/** Deletes key; deleting a missing key is not an error. */
GANG_API gang_status_t gang_store_delete(gang_store_t* store, const char* key);

/** Frees memory the library allocated for the caller. NULL is a no-op. */
GANG_API void gang_free(void* ptr);

/* ========================================================================
 * Options
 * ======================================================================== */

/** Options for gang_create. Initialise with gang_options_init (or
 *  GANG_OPTIONS_INITIALIZER in C), then change what you need.
 *
 *  The struct has no implicit padding and only grows at its end, in 8-byte
 *  units; fields added later default to all-zero bits. The library reads
 *  min(struct_size, its own size) bytes; bytes beyond its own size must be
 *  zero (else GANG_ERR_UNSUPPORTED). */
typedef struct gang_options {
  size_t struct_size;      /* set by gang_options_init */
  const char* backend;     /* NULL or "auto", "shm", "gloo", "nccl", "fake"; or a plugin name */
  int32_t device_type;     /* gang_device_type_t; default GANG_DEVICE_CPU */
  int32_t device_index;    /* -1: local_rank % visible devices */
  int32_t rank;            /* this process's rank; -1: from the environment */
  int32_t size;            /* number of ranks; -1: from the environment */
  const char* init_method; /* a gang_store_create url, or "env://"; NULL:
                              GANG_INIT_METHOD, else the launch environment
                              (gang_create) */
  gang_store_t* store;     /* wins over init_method; must outlive the gang and
                              every gang split from it */
  int64_t timeout_ms;      /* <= 0: GANG_TIMEOUT_MS, else 600000 */
  const char* name;        /* shown in logs and errors; NULL: "root" */
  int32_t debug;           /* -1 off, 0 GANG_DEBUG decides, 1 fingerprint checks */
  int32_t reserved0;       /* must be 0 */
} gang_options_t;

/** Fills *options with the defaults for a caller built with struct_size
 *  (use gang_options_init). Does nothing if options is NULL or struct_size is
 *  smaller than the first version of the struct. */
GANG_API void gang_options_init_v(gang_options_t* options, size_t struct_size);

/** Fills *options with the defaults. */
static inline void gang_options_init(gang_options_t* options) {
  gang_options_init_v(options, sizeof *options);
}

#define GANG_OPTIONS_INITIALIZER                                               \
  { sizeof(gang_options_t), NULL, GANG_DEVICE_CPU, -1, -1, -1, NULL, NULL, 0,  \
    NULL, 0, 0 }

/* ========================================================================
 * Creating gangs
 * ======================================================================== */

/** Creates a gang. Collective over all `size` ranks: every rank calls it with
 *  the same size, backend, name and rendezvous.
 *
 *  Backends: "shm" (CPU, the ranks of one host through shared memory),
 *  "gloo" (CPU over TCP), "fake" (see gang_create_fake; rank and size are
 *  taken from the options), "nccl" (CUDA, a module loaded on demand), and
 *  "auto"/NULL: for CPU, shm when every rank runs on one host, gloo when
 *  each host runs one rank, shm within hosts and gloo between them
 *  ("shm+gloo") otherwise; for CUDA, nccl (GANG_ERR_UNAVAILABLE where the
 *  module or a GPU is missing, never a silent CPU fallback).
 *
 *  Rank and size: options->rank and options->size, or both -1 to take them
 *  from the launch environment (gang_env_detect). A process with no
 *  launcher variables at all is rank 0 of 1, and the first such
 *  gang_create of the process says so in a warning (GANG_LOG_LEVEL), with
 *  how to start more ranks: processes started by hand are otherwise jobs of
 *  one rank each, silently.
 *
 *  Rendezvous: options->store, else options->init_method, else the
 *  GANG_INIT_METHOD environment variable, else the launch environment's
 *  master. An init method of "env://" (torch's spelling) is the master at
 *  MASTER_ADDR and MASTER_PORT, whatever the launcher, with the rank and
 *  size from the environment (options->rank and options->size -1 with
 *  none set is GANG_ERR_INVALID_ARGUMENT, as torch refuses it). The
 *  master: "torch://MASTER_ADDR:MASTER_PORT" under torchrun with
 *  TORCHELASTIC_USE_AGENT_STORE=True (its agent already serves PyTorch's
 *  TCPStore there, so gang never binds that port), otherwise
 *  "tcp://master_addr:master_port". With a "tcp://host:port" rendezvous rank 0
 *  serves the store on that port and every rank is a client of it; if the
 *  port is already served (a launcher such as gangrun hosts the store and
 *  exports GANG_INIT_METHOD), rank 0 is a client too, and a server there that
 *  is not a gang store is GANG_ERR_STORE naming the address and the
 *  variables it came from. A size-1 gang needs no rendezvous. Keys live under
 *  gang/<name>/<generation>/. Every attempt of rank 0 opens a new generation
 *  (gang/<name>/generations counts them, gang/<name>/open names the newest);
 *  the other ranks say hello to the open generation with their size and a
 *  nonce of their attempt, and go ahead only once rank 0's go for that
 *  generation lists their nonce. So a reused store never serves stale keys,
 *  and a failed or abandoned gang_create never poisons the store: an
 *  immediate retry with the same store and name works, and so does a
 *  different size under that name (ranks that disagree on the size get
 *  GANG_ERR_MISMATCH naming both). Every rank that joins adds 1 to
 *  gang/<name>/joined. The whole creation -- rendezvous, connections, the
 *  closing barrier -- ends within options->timeout_ms.
 *
 *  The network interface is GANG_SOCKET_IFNAME if set, else the one that
 *  reaches the store's host (loopback only if that host is loopback).
 *
 *  Gloo gangs set SIGPIPE to SIG_IGN if it still has its default action, so
 *  that a peer that went away is GANG_ERR_PEER_LOST rather than the death of
 *  this process; a handler the program installed is left alone.
 *
 *  Blocking: until every rank has joined or the timeout passes.
 *  Returns GANG_ERR_INVALID_ARGUMENT (bad option, naming it),
 *  GANG_ERR_UNSUPPORTED (unknown trailing option bytes), GANG_ERR_UNAVAILABLE
 *  (backend not built or device missing), GANG_ERR_STORE, GANG_ERR_TIMEOUT
 *  (a rank did not join in time), GANG_ERR_MISMATCH (ranks passed different
 *  sizes, or asked for different backends or devices: at once, on every
 *  rank, naming both), GANG_ERR_SYSTEM. */
GANG_API gang_status_t gang_create(const gang_options_t* options,
                                   gang_t** out);

/** Creates a fake gang: one process standing in for rank `rank` of a
 *  `size`-rank gang in which every rank holds this rank's data. No traffic.
 *
 *  all_reduce SUM gives x*size, PROD x^size, MIN/MAX/AVG x; reduce is
 *  all_reduce at the root; all_gather(v) and gather repeat the input;
 *  broadcast and barrier are no-ops; scatter and all_to_all(v) return chunk
 *  `rank` (send is required on every rank); reduce_scatter(v) is the op over
 *  `size` copies of the own chunk; bytes are copied or repeated; all_sum is
 *  value*size. send/recv and gang_split return GANG_ERR_UNSUPPORTED;
 *  gang_create_subgang gives a fake gang with the right rank and size. */
GANG_API gang_status_t gang_create_fake(int rank, int size, gang_t** out);

/** Destroys a gang. Local and bounded: waits at most the gang's timeout for
 *  this rank's in-flight operations, aborts the rest, then frees. Work handles
 *  stay valid, report their final status (or GANG_ERR_ABORTED) and must still
 *  be destroyed. Gangs split from this one stay valid. NULL is a no-op.
 *
 *  Thread-safe, also against calls with the same gang on other threads. The
 *  handle dies as gang_destroy begins: a call that starts afterwards, on any
 *  thread, and a second gang_destroy return GANG_ERR_INVALID_ARGUMENT (queries
 *  their "no gang" value), and never reach another gang. A blocking call
 *  another thread is in (a collective, a byte payload, a flag) is aborted at
 *  once: it returns GANG_ERR_ABORTED ("destroyed while ... blocked"), and
 *  the peers' operations with this rank fail. Asynchronous work is waited
 *  for as above. The memory goes when the last call running has returned.
 *  Strings a query returned for the gang (gang_name) are valid until it is
 *  destroyed.
 *
 *  The same holds for every handle: a destroyed handle, or a value gang never
 *  made, is GANG_ERR_INVALID_ARGUMENT naming the function, without any memory
 *  being read through it. (Handle values are recycled, but one names a new
 *  object only after hundreds of thousands of later creations.)
 *
 *  After fork(): the child inherits the parent's handles (gangs, stores,
 *  works, gangs_t) but not the threads and connections behind them, and its
 *  use of them would break the parent's gang. So they are inert in the
 *  child: every call with one returns GANG_ERR_INVALID_ARGUMENT at once, the
 *  message saying the handle belongs to the parent process; gang_destroy
 *  (and the other destroys) return GANG_OK and only forget the handle in the
 *  child, touching nothing the parent uses. The parent's gang is untouched.
 *  (A Python multiprocessing worker started with "fork", such as a
 *  DataLoader worker, is such a child.) */
GANG_API gang_status_t gang_destroy(gang_t* gang);

/** Aborts a gang. Thread-safe and prompt: in-flight and later operations on
 *  this gang return GANG_ERR_ABORTED; it does not wait for peers. Peers see
 *  their connections to this rank close and fail with GANG_ERR_PEER_LOST
 *  before their own timeout. The gang must still be destroyed. */
GANG_API gang_status_t gang_abort(gang_t* gang);

/** This process's rank in the gang; -1 for a NULL gang. */
GANG_API int gang_rank(const gang_t* gang);

/** The number of ranks; -1 for a NULL gang. */
GANG_API int gang_size(const gang_t* gang);

/** The backend's name ("gloo", "fake"); "" for a NULL gang. */
GANG_API const char* gang_backend_name(const gang_t* gang);

/** Where the gang's buffers live; GANG_DEVICE_CPU for a NULL gang. */
GANG_API gang_device_type_t gang_device_type(const gang_t* gang);

/** The device ordinal; -1 on CPU. */
GANG_API int gang_device_index(const gang_t* gang);

/** The gang's name ("root", "root/split1.0", ...); "" for a NULL gang. */
GANG_API const char* gang_name(const gang_t* gang);

/** The rank, in the gang gang_create/gang_create_fake made at the top of the
 *  split tree, of this gang's member `rank`; -1 for a bad rank or gang. */
GANG_API int gang_root_rank(const gang_t* gang, int rank);

/** Sets the timeout of operations issued afterwards (> 0 ms). */
GANG_API gang_status_t gang_set_timeout(gang_t* gang, int64_t timeout_ms);

/** Sets the CUDA stream operations are ordered on (cudaStream_t as a void*;
 *  NULL is the legacy default stream). A CPU gang accepts only NULL: a
 *  non-NULL stream is GANG_ERR_UNSUPPORTED.
 *
 *  The stream contract of a CUDA gang (that of torch.distributed's NCCL
 *  backend): an operation reads its input only after the work queued on the
 *  caller's stream before the call (the stream set here; without one, the
 *  legacy default stream, while the operation itself runs on a stream of
 *  the gang's). A blocking call, and gang_work_wait, make the caller's
 *  stream wait for the result; with GANG_CUDA_COMPLETION_HOST (the default)
 *  they also wait on the host until the device is done, with
 *  GANG_CUDA_COMPLETION_STREAM they return once the result is ordered on
 *  the stream. gang_work_test always tells whether the device is done.
 *
 *  CUDA graphs: operations issued while the set stream is capturing are
 *  enqueued into the graph and nothing else (no event, no host wait); their
 *  blocking calls return at once, and every launch of the graph runs them.
 *  A gang with no stream set cannot be captured (its operations run on the
 *  legacy stream's side). */
GANG_API gang_status_t gang_set_cuda_stream(gang_t* gang, void* stream);

/** Sets what blocking calls and gang_work_wait of a CUDA gang wait for
 *  (gang_cuda_completion_t; see gang_set_cuda_stream), for operations issued
 *  afterwards; sub-gangs split later inherit it. A CPU gang accepts both
 *  (its operations are done when they return). An unknown mode is
 *  GANG_ERR_INVALID_ARGUMENT. Added in 0.2. */
GANG_API gang_status_t gang_set_cuda_completion(gang_t* gang,
                                                gang_cuda_completion_t mode);

/** The gang's timeout in milliseconds; -1 for a NULL gang. */
GANG_API int64_t gang_get_timeout(const gang_t* gang);

/** The first error that failed the gang in *out; GANG_OK if none. */
GANG_API gang_status_t gang_get_async_error(const gang_t* gang,
                                            gang_status_t* out);

/** Nonzero if the backend can reduce `dtype` with `op`; answers without
 *  traffic. 0 for a NULL gang, values out of range, and AVG of a type that
 *  is not floating (see gang_op_t). */
GANG_API int gang_supports(const gang_t* gang, gang_op_t op,
                           gang_dtype_t dtype);

/* ========================================================================
 * Sub-gangs
 * ======================================================================== */

#define GANG_COLOR_NONE (-1)

/** Splits the parent, like MPI_Comm_split: collective over the parent. Ranks
 *  with the same color (>= 0) form a gang, ordered by key, ties by parent
 *  rank; color GANG_COLOR_NONE gives *out = NULL. The new gang inherits the
 *  backend, device, timeout and debug setting, rendezvous through the
 *  parent's store, and is named "<parent>/split<n>.<color>".
 *  Returns GANG_ERR_INVALID_ARGUMENT (color < -1), GANG_ERR_UNSUPPORTED (fake
 *  gangs), or any error of a collective. */
GANG_API gang_status_t gang_split(gang_t* parent, int color, int key,
                                  gang_t** out);

/** Makes a gang of the survivors of `gang`, which may have failed or been
 *  aborted (a peer was lost): collective over the ranks still alive. They
 *  agree through the gang's store on one membership, the same for all of
 *  them: every rank that calls gang_shrink before the agreement settles
 *  (all ranks arrived, or none new for GANG_SHRINK_SETTLE_MS, default 300
 *  ms), even if another dies meanwhile. *out is a new gang of those ranks,
 *  ranked in the order of their old ranks, on the same kind of backend,
 *  named "<base>/shrink<n>", where n counts the membership changes behind
 *  it (1 for the first) and base is the name without the last change's
 *  segment ("root" shrinks to "root/shrink1", "root/grow2" to
 *  "root/shrink3": names stay short however often a job shrinks and
 *  grows); gang_root_rank keeps mapping to the root
 *  gang's ranks. timeout_ms <= 0 means the gang's timeout. The old gang
 *  stays failed: destroy it when convenient. A rank that calls after the
 *  agreement (it was frozen, or late) is excluded: GANG_ERR_ABORTED saying
 *  so, and it never enters the new gang, which meets under a name and
 *  store prefix only the agreed ranks use, on connections of its own. The
 *  survivors post the agreement on the old gang's store, so every later
 *  call of an excluded rank on the old gang fails too, saying it was
 *  excluded and by which survivors. A survivor that dies after the
 *  agreement, before the new gang met (within GANG_SHRINK_FORM_MS, default
 *  3000 ms), makes the others agree again without it (the name's <n> then
 *  counts the attempts). GANG_ERR_UNSUPPORTED for a gang without a store
 *  (fake). Added in 0.3. */
GANG_API gang_status_t gang_shrink(gang_t* gang, int64_t timeout_ms,
                                   gang_t** out);

/** Admits the processes waiting in gang_join for this gang (by its base
 *  name: its name without its last membership change, "root/shrink3" ->
 *  "root"; a sub-gang's joiners are its own): collective over the
 *  members, at a point the program chooses (a step boundary). All members
 *  admit the same joiners: those that asked before the members' look. The
 *  grown gang asks for the backend this gang's creator asked for (a gloo
 *  gang stays on gloo). A joiner whose process has died since it asked
 *  (or that never said what it asks for within GANG_FAILURE_DETECT_MS) is
 *  skipped, and one that asks for another backend or device is refused;
 *  both are named in the log, and the others come in.
 *  *out is a new gang, "<base>/grow<n>" (named as by gang_shrink), of
 *  the members first, in their
 *  order, then the joiners in the order they asked; with no joiner waiting
 *  it returns GANG_OK at once with *out = NULL. The old gang stays usable
 *  (destroy it when the new one takes over). timeout_ms <= 0: the gang's
 *  timeout. Added in 0.3. */
GANG_API gang_status_t gang_grow(gang_t* gang, int64_t timeout_ms,
                                 gang_t** out);

/** A new process (a replacement) asks to join the running gang named
 *  options->name (default "root") through the job's store (options->store,
 *  options->init_method or the launch environment, as gang_create; never
 *  served by the joiner), and blocks until the members admit it with
 *  gang_grow, or until options->timeout_ms (GANG_ERR_TIMEOUT; the request
 *  is withdrawn, so no later gang_grow counts it). options->rank and size
 *  are ignored: the members assign them. options->backend "auto" (or
 *  NULL) takes the gang's backend; another backend or device than the
 *  gang's is refused by the members' gang_grow (GANG_ERR_INVALID_ARGUMENT
 *  naming both), and "fake" at once. A process that `gangrun
 *  --replace-failed` starts in place of a failed rank has GANG_JOIN=1,
 *  GANG_REPLACES (the rank it replaces) and GANG_INIT_METHOD and
 *  GANG_STORE_TOKEN of the job's store, but no GANG_RANK or GANG_SIZE:
 *  gang_join with the defaults of GANG_OPTIONS_INITIALIZER reaches the
 *  job's store, and gang_create with rank and size -1 refuses to run there
 *  (GANG_ERR_INVALID_ARGUMENT saying to call gang_join). Added in 0.3. */
GANG_API gang_status_t gang_join(const gang_options_t* options, gang_t** out);

/** Creates a gang of the listed parent ranks: collective over the parent;
 *  every rank passes the same n >= 1 distinct ranks. Members get a gang whose
 *  rank i is parent rank ranks[i]; non-members get *out = NULL. */
GANG_API gang_status_t gang_create_subgang(gang_t* parent, const int* ranks,
                                           int n, gang_t** out);

/* ========================================================================
 * Collectives
 *
 * Counts are in elements. A count of 0 is still a collective every rank
 * calls, and its pointers may be NULL. `root` and `peer` are ranks of this
 * gang. The last argument makes the call asynchronous: NULL blocks until the
 * operation is done; non-NULL returns at once with a work handle, and the
 * buffers are borrowed until the work completes. Operations on one gang run
 * in the order they were issued, on every rank.
 *
 * Overlapping send and receive buffers are GANG_ERR_INVALID_ARGUMENT except
 * for the in-place forms named on each function.
 *
 * Errors found before issue (GANG_ERR_INVALID_ARGUMENT, _UNSUPPORTED,
 * _UNAVAILABLE) leave the gang usable. Any error after issue (timeout, lost
 * peer, mismatch, abort, I/O) fails the gang: every later operation returns
 * GANG_ERR_ABORTED at once with a message quoting the first error. A lost or
 * late peer is named with how it was noticed ("lost the connection to rank
 * 3", "rank 3 (pid 812) is gone", "timed out waiting for rank 3"); a rank
 * that learnt of the loss only from another survivor (whose connection
 * closed) adds the first failure the gang recorded in its store: "; the
 * first rank of the gang to fail was rank 2: lost the connection to rank
 * 3".
 *
 * Mismatches are always caught on CPU gangs: before any payload moves,
 * every rank tells each rank it will exchange data with what it called
 * (operation, dtype, op, root, counts; what it sends and expects). Ranks
 * that passed different sizes, dtypes or operations get
 * GANG_ERR_MISMATCH naming both calls (or GANG_ERR_PEER_LOST /
 * GANG_ERR_TIMEOUT when the other side failed first or never came), within
 * the timeout: never a crash, and never GANG_OK with partial data. A send
 * whose size differs from its receive is GANG_ERR_MISMATCH at the
 * receiver; the sender gets GANG_ERR_PEER_LOST, or GANG_OK when its bytes
 * all left. Debug checks (options.debug, GANG_DEBUG=detail) add a
 * comparison of every rank's full call, count arrays included, before
 * each collective.
 * ======================================================================== */

/** recv = op over every rank's send, `count` elements. In place when
 *  send == recv. */
GANG_API gang_status_t gang_all_reduce(gang_t* gang, const void* send,
                                       void* recv, size_t count,
                                       gang_dtype_t dtype, gang_op_t op,
                                       gang_work_t** work);

/** recv at root = op over every rank's send. Off root recv may be NULL; if
 *  not, its contents become unspecified. In place when send == recv. */
GANG_API gang_status_t gang_reduce(gang_t* gang, const void* send, void* recv,
                                   size_t count, gang_dtype_t dtype,
                                   gang_op_t op, int root, gang_work_t** work);

/** Copies root's buf to every rank's buf. */
GANG_API gang_status_t gang_broadcast(gang_t* gang, void* buf, size_t count,
                                      gang_dtype_t dtype, int root,
                                      gang_work_t** work);

/** recv (size*count elements) = every rank's send, in rank order. In place
 *  when send == recv + rank*count. */
GANG_API gang_status_t gang_all_gather(gang_t* gang, const void* send,
                                       void* recv, size_t count,
                                       gang_dtype_t dtype, gang_work_t** work);

/** recv = every rank's send, concatenated in rank order; rank r contributes
 *  recv_counts[r] elements. ncounts == size and send_count ==
 *  recv_counts[rank]. In place when send == recv + sum(recv_counts[<rank]). */
GANG_API gang_status_t gang_all_gatherv(gang_t* gang, const void* send,
                                        size_t send_count, void* recv,
                                        const size_t* recv_counts,
                                        size_t ncounts, gang_dtype_t dtype,
                                        gang_work_t** work);

/** recv at root (size*count elements) = every rank's send in rank order;
 *  ignored elsewhere. In place at root when send == recv + root*count. */
GANG_API gang_status_t gang_gather(gang_t* gang, const void* send, void* recv,
                                   size_t count, gang_dtype_t dtype, int root,
                                   gang_work_t** work);

/** Rank r's recv = chunk r of root's send (size*count elements; ignored
 *  elsewhere). In place at root when recv == send + root*count. */
GANG_API gang_status_t gang_scatter(gang_t* gang, const void* send, void* recv,
                                    size_t count, gang_dtype_t dtype, int root,
                                    gang_work_t** work);

/** Rank r's recv (recv_count elements) = op over chunk r of every rank's send
 *  (size*recv_count elements). In place when recv == send + rank*recv_count. */
GANG_API gang_status_t gang_reduce_scatter(gang_t* gang, const void* send,
                                           void* recv, size_t recv_count,
                                           gang_dtype_t dtype, gang_op_t op,
                                           gang_work_t** work);

/** Like gang_reduce_scatter with chunk r of recv_counts[r] elements; send
 *  holds sum(recv_counts). ncounts == size. In place when
 *  recv == send + sum(recv_counts[<rank]). */
GANG_API gang_status_t gang_reduce_scatterv(gang_t* gang, const void* send,
                                            void* recv,
                                            const size_t* recv_counts,
                                            size_t ncounts, gang_dtype_t dtype,
                                            gang_op_t op, gang_work_t** work);

/** Chunk p of send (count elements) goes to rank p, arriving as chunk
 *  `rank` of its recv. Both hold size*count elements; never in place. */
GANG_API gang_status_t gang_all_to_all(gang_t* gang, const void* send,
                                       void* recv, size_t count,
                                       gang_dtype_t dtype, gang_work_t** work);

/** Like gang_all_to_all with per-peer counts: send_counts[p] elements go to
 *  rank p, recv_counts[p] arrive from rank p, packed in rank order.
 *  nsend == nrecv == size; never in place. */
GANG_API gang_status_t gang_all_to_allv(gang_t* gang, const void* send,
                                        const size_t* send_counts, size_t nsend,
                                        void* recv, const size_t* recv_counts,
                                        size_t nrecv, gang_dtype_t dtype,
                                        gang_work_t** work);

/** Blocks until every rank has entered the barrier. */
GANG_API gang_status_t gang_barrier(gang_t* gang, gang_work_t** work);

/* ---- point-to-point ---------------------------------------------------- */

#define GANG_TAG_MAX 0x7fffffff

/** Sends count elements to peer with tag in [0, GANG_TAG_MAX]. The receiver
 *  passes the same count, dtype and tag; between one pair, messages with
 *  equal tags match in issue order. On CPU gangs sends and receives are
 *  posted the moment they are issued and matched by (peer, tag), as in MPI,
 *  independently of collectives and of each other: any pattern MPI allows
 *  with distinct tags completes (e.g. two asynchronous sends, then the
 *  receives in reverse tag order). A blocking send may wait until the peer
 *  posts its receive: use asynchronous calls or gang_group_start/end to
 *  exchange. peer == own rank is GANG_ERR_INVALID_ARGUMENT.
 *
 *  CUDA gangs (NCCL): sends and receives are enqueued in issue order with
 *  everything else and take tag 0 only; asynchronous calls are NOT enough to
 *  exchange, since a send waits on the GPU for its receive and two ranks
 *  that both send first deadlock there. Exchange in one group:
 *    gang_group_start(g); gang_send(g, a, n, dt, peer, 0, NULL);
 *    gang_recv(g, b, n, dt, peer, 0, NULL); gang_group_end(g, NULL); */
GANG_API gang_status_t gang_send(gang_t* gang, const void* buf, size_t count,
                                 gang_dtype_t dtype, int peer, int tag,
                                 gang_work_t** work);

/** Receives count elements from peer with tag; see gang_send. */
GANG_API gang_status_t gang_recv(gang_t* gang, void* buf, size_t count,
                                 gang_dtype_t dtype, int peer, int tag,
                                 gang_work_t** work);

/** Receives count elements with tag from whichever rank sends them first
 *  (MPI's MPI_ANY_SOURCE); *source is that rank, written once the receive
 *  completes (like buf, borrowed until then). MPI's matching rules hold:
 *  messages from one sender match in the order it sent them, and
 *  receives match in the order they were posted, so a receive from a
 *  named peer posted after this one cannot take a message this one could.
 *  The message must have count elements of dtype (else
 *  GANG_ERR_MISMATCH, naming the sender). CPU gangs (shm, gloo, shm+gloo);
 *  GANG_ERR_UNSUPPORTED where the backend matches in issue order (CUDA)
 *  or is a plugin's. Not inside a group (GANG_ERR_INVALID_ARGUMENT), nor
 *  with source NULL. Added in 0.4. */
GANG_API gang_status_t gang_recv_any(gang_t* gang, void* buf, size_t count,
                                     gang_dtype_t dtype, int tag, int* source,
                                     gang_work_t** work);

/** Opens a group on this thread's use of the gang: the operations this
 *  thread issues until gang_group_end start together and complete as one
 *  work, so both sides of an exchange can send before they receive. Groups
 *  do not nest. Operations in a group take their own `work` argument as
 *  NULL.
 *  Threads: a group belongs to the thread that opened it. Operations other
 *  threads issue on the gang meanwhile are NOT absorbed into it: they are
 *  issued and executed normally (so their issue order across ranks is
 *  theirs to keep, as always). Calls that are not collectives or
 *  send/recv of this header -- the *_bytes calls, gang_broadcast_flag,
 *  gang_all_sum, gang_split, gang_create_subgang, gangs_split_parallel --
 *  are GANG_ERR_INVALID_ARGUMENT on a thread with an open group, naming the
 *  call. */
GANG_API gang_status_t gang_group_start(gang_t* gang);

/** Closes the group and issues its operations. work NULL waits for all of
 *  them; non-NULL returns a work for the whole group. An empty group is a
 *  no-op. */
GANG_API gang_status_t gang_group_end(gang_t* gang, gang_work_t** work);

/* ---- byte payloads ("objects") ----------------------------------------- */

/** Broadcasts len bytes at data from root. Every rank, root included, gets a
 *  fresh copy in *out (free with gang_free) and its length in *out_len.
 *  data and len are ignored off root. Blocking. */
GANG_API gang_status_t gang_broadcast_bytes(gang_t* gang, const void* data,
                                            size_t len, int root, void** out,
                                            size_t* out_len);

/** Gathers every rank's bytes: *out holds them concatenated in rank order
 *  (free with gang_free); lens (the caller's array, nlens == size) gets each
 *  rank's length. Blocking. */
GANG_API gang_status_t gang_all_gather_bytes(gang_t* gang, const void* data,
                                             size_t len, void** out,
                                             size_t* lens, size_t nlens);

/** Sends len bytes to peer; the receiver learns the length. Blocking. */
GANG_API gang_status_t gang_send_bytes(gang_t* gang, const void* data,
                                       size_t len, int peer, int tag);

/** Receives the bytes peer sent with tag into a fresh *out (free with
 *  gang_free). Blocking. */
GANG_API gang_status_t gang_recv_bytes(gang_t* gang, int peer, int tag,
                                       void** out, size_t* out_len);

/* ---- helpers from training code --------------------------------------- */

/** *out = root's flag (nonzero becomes 1) on every rank. Blocking. */
GANG_API gang_status_t gang_broadcast_flag(gang_t* gang, int flag, int root,
                                           int* out);

/** *out = the sum of every rank's value, the same on every rank. Blocking. */
GANG_API gang_status_t gang_all_sum(gang_t* gang, double value, double* out);

/* ========================================================================
 * Parallel topology
 *
 * Training frameworks carve one gang into the gangs of each parallelism:
 * data (dp), tensor (tp), pipeline (pp), context (cp), expert (ep, with its
 * expert-data gang edp), FSDP shard and replicate (sdp, rdp), model
 * (mp = tp x pp) and dp x cp (dpcp). The layout is a pure function of the
 * gang size and a gang_parallel_config_t; gang_layout_ranks computes it
 * without processes and gangs_split_parallel builds every gang from it.
 *
 * The dense axes tp, cp, pp and dp are laid out by `order`, fastest-varying
 * first; with the default "tp-cp-pp-dp", rank = tp + TP*(cp + CP*(pp + PP*dp)).
 * With 8 ranks and tp=pp=dp=2: tp gangs [0,1] [2,3] [4,5] [6,7], pp gangs
 * [0,2] [1,3] [4,6] [5,7], dp gangs [0,4] [1,5] [2,6] [3,7]. Order
 * "tp-cp-dp-pp" gives Megatron-LM's layout.
 *
 * Multi-axis gangs list their ranks with earlier axes of `order` varying
 * faster: dpcp = the ranks holding the same tp/pp shard; mp = the tp x pp
 * ranks of one (dp, cp) position; ep gangs are contiguous blocks of ep ranks
 * of the dpcp gang and edp the strided rest; sdp gangs are contiguous blocks
 * of sdp ranks of the dpcp gang and rdp the strided rest (with cp = 1 this is
 * fairseq2's create_fsdp_gangs).
 * ======================================================================== */

/** The axes of gangs_get and gang_layout_ranks. Append-only. */
typedef enum gang_axis {
  GANG_AXIS_ROOT = 0,
  GANG_AXIS_DP = 1,
  GANG_AXIS_TP = 2,
  GANG_AXIS_PP = 3,
  GANG_AXIS_CP = 4,
  GANG_AXIS_EP = 5,
  GANG_AXIS_EDP = 6,
  GANG_AXIS_SDP = 7,
  GANG_AXIS_RDP = 8,
  GANG_AXIS_MP = 9,
  GANG_AXIS_DPCP = 10,
  GANG_AXIS_FORCE_32BIT = 0x7fffffff
} gang_axis_t;

/** The axis's short name ("dp", "tp", ...); "" for an invalid axis. */
GANG_API const char* gang_axis_name(gang_axis_t axis);

/** Degrees of parallelism. Initialise with gang_parallel_config_init; the
 *  struct follows the same size rules as gang_options_t. */
typedef struct gang_parallel_config {
  size_t struct_size;
  int32_t tp, cp, pp; /* tensor, context, pipeline degrees; default 1 */
  int32_t dp;         /* data-parallel degree; -1 (default): size/(tp*cp*pp) */
  int32_t ep;         /* expert degree; default 1 */
  int32_t sdp;        /* FSDP shard degree; -1 (default): dp*cp (full shard) */
  int32_t reserved0;  /* must be 0 */
  int32_t reserved1;  /* must be 0; keeps `order` aligned without padding */
  const char* order;  /* dense axes, fastest first, joined by '-';
                         NULL: "tp-cp-pp-dp" */
} gang_parallel_config_t;

GANG_API void gang_parallel_config_init_v(gang_parallel_config_t* config,
                                          size_t struct_size);

static inline void gang_parallel_config_init(gang_parallel_config_t* config) {
  gang_parallel_config_init_v(config, sizeof *config);
}

/** The parallel gangs carved from one gang. */
typedef struct gangs_s gangs_t;

/** Builds every axis's gang from `gang`. Collective over `gang` (any gang;
 *  its ranks are the "global" ranks of the layout), and every rank passes
 *  the same configuration (a differing one is GANG_ERR_MISMATCH on every
 *  rank). An axis of degree 1 is a size-1 gang made without traffic; axes
 *  with identical rank sets share one handle, and an axis spanning the whole
 *  gang is `gang` itself. Works on fake gangs, without traffic.
 *  Returns GANG_ERR_INVALID_ARGUMENT for a bad configuration, naming the
 *  sizes (e.g. "tp*cp*pp (12) must divide the gang size (8)"); the gang
 *  stays usable. */
GANG_API gang_status_t gangs_split_parallel(gang_t* gang,
                                            const gang_parallel_config_t* config,
                                            gangs_t** out);

/** The gang of `axis`, borrowed from gangs (valid until gangs_destroy; the
 *  root is the gang passed to gangs_split_parallel). NULL only for an
 *  invalid axis or handle. */
GANG_API gang_t* gangs_get(const gangs_t* gangs, gang_axis_t axis);

/** Destroys the gangs gangs_split_parallel made (not the gang it was given).
 *  NULL is a no-op. */
GANG_API gang_status_t gangs_destroy(gangs_t* gangs);

/** The layout as a pure function: the ranks of `rank`'s gang on `axis` in a
 *  gang of `size`, in gang-rank order, written to ranks[0..*n). If capacity
 *  is too small, sets *n to the number needed and returns
 *  GANG_ERR_INVALID_ARGUMENT. No processes or traffic. */
GANG_API gang_status_t gang_layout_ranks(int size,
                                         const gang_parallel_config_t* config,
                                         gang_axis_t axis, int rank, int* ranks,
                                         size_t capacity, size_t* n);

/* After a lost rank.
 *
 * The survivors of a gang laid out by a configuration (gang_shrink made
 * their gang) go on in the same layout with fewer data-parallel replicas.
 * A replica is the tp*cp*pp ranks sharing one dp coordinate, one whole copy
 * of the model; one that lost a rank cannot run, its tp, cp or pp gangs
 * being broken. The rule:
 *  - The replicas all of whose ranks survived are kept; the survivors of
 *    broken replicas are spares.
 *  - dp becomes the number kept, lowered further to the largest count the
 *    configuration accepts (ep and an explicit sdp must divide dp*cp) by
 *    dropping the kept replicas with the highest dp coordinates, whose
 *    ranks become spares too. tp, cp, pp, ep, sdp and order stay as they
 *    were (sdp -1 stays a full shard, now of the new dp*cp).
 *  - Each kept replica keeps its tp, cp and pp coordinates, and the kept
 *    replicas take dp coordinates 0, 1, ... in the order of their old ones;
 *    the new ranks follow from `order` as in any layout. Since that keeps
 *    the order of every coordinate, the active ranks keep the order of
 *    their old ranks whatever `order` is (with "tp-cp-dp-pp" and pp > 1
 *    they are not a contiguous block, but still ascending).
 *  - When no replica survived whole, no layout of the configuration fits:
 *    GANG_ERR_INVALID_ARGUMENT saying so. Going on with a smaller tp*cp*pp
 *    means resharding the model, which is the program's to decide.
 * Example: 8 ranks with tp=2 (dp=4; replicas [0,1] [2,3] [4,5] [6,7]) lose
 * rank 3. Replica 1 is broken, so dp=3; the active ranks are the old ranks
 * [0,1,4,5,6,7] (new rank i is the i-th of them: new tp gangs [0,1] [2,3]
 * [4,5], new dp gangs [0,2,4] [1,3,5]) and old rank 2 is a spare. */

/** The layout after a loss as a pure function (no processes or traffic):
 *  given a gang of `size` laid out by `config` and the old ranks that
 *  survived, survivors[0..n_survivors) in any order, writes the new
 *  configuration to *new_config and the active old ranks in new-rank order
 *  to active[0..*n_active): new rank i was old rank active[i]. The survivors
 *  not listed are the spares. new_config must be initialised with
 *  gang_parallel_config_init (its struct_size is honoured); it gets the
 *  degrees of the rule above, dp always explicit, and its order points at
 *  config->order (the caller's string). new_config may be config itself.
 *  capacity n_survivors always suffices; if capacity is too small, sets
 *  *n_active to the number needed and returns GANG_ERR_INVALID_ARGUMENT,
 *  writing nothing else. GANG_ERR_INVALID_ARGUMENT also for a bad
 *  configuration, a survivor out of range or listed twice (naming
 *  "survivors"), and when no layout fits. Added in 0.3. */
GANG_API gang_status_t gang_layout_after_loss(
    int size, const gang_parallel_config_t* config, const int* survivors,
    size_t n_survivors, gang_parallel_config_t* new_config, int* active,
    size_t capacity, size_t* n_active);

/** Carves the gangs of the layout after a loss. Collective over `shrunk`,
 *  the gang gang_shrink made from `old_gang`; every rank passes its own
 *  old_gang (only its rank and size are read, so a failed or aborted one
 *  will do) and the same configuration, the one old_gang was laid out by
 *  (a differing configuration or old gang size is GANG_ERR_MISMATCH on every
 *  rank). The ranks learn each other's old ranks (one all-gather over
 *  shrunk) and apply the rule above. An active rank gets gangs made as by
 *  gangs_split_parallel with the new configuration on a new gang of the
 *  active ranks in new-rank order, "<shrunk's name>/loss<n>", which is
 *  their root (gangs_get(..., GANG_AXIS_ROOT)) and which *out owns:
 *  gangs_destroy frees it with the others. A spare gets GANG_OK and
 *  *out = NULL; it stays a member of `shrunk`, as the active ranks do, so
 *  the program may keep it there (say, waiting in a collective on shrunk
 *  for the end of the job, or to take a replica's place later) or let it
 *  exit once the others no longer use shrunk. shrunk stays usable either
 *  way. GANG_ERR_INVALID_ARGUMENT when no layout fits (on every rank,
 *  shrunk usable), GANG_ERR_UNSUPPORTED on a fake gang. Also works with
 *  old_gang == shrunk, where nothing was lost. Added in 0.3. */
GANG_API gang_status_t gangs_split_after_loss(
    gang_t* old_gang, gang_t* shrunk, const gang_parallel_config_t* config,
    gangs_t** out);

/* ========================================================================
 * Environment and launch
 *
 * gang_create takes rank and size from the environment, through
 * gang_env_detect, when options.rank and options.size are -1, and its
 * rendezvous when no store, init_method or GANG_INIT_METHOD is given (see
 * gang_create). The first source that sets both a rank and a size wins
 * entirely; the others are neither read nor cross-checked (so torchrun
 * inside an sbatch job just works). In order:
 *   "gang"     GANG_RANK GANG_SIZE GANG_LOCAL_RANK GANG_LOCAL_SIZE
 *              GANG_NODE_RANK GANG_NUM_NODES GANG_INIT_METHOD
 *   "torchrun" RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK
 *              GROUP_WORLD_SIZE MASTER_ADDR MASTER_PORT, and
 *              TORCHELASTIC_USE_AGENT_STORE=True when the agent serves its
 *              TCPStore there
 *   "openmpi"  OMPI_COMM_WORLD_RANK _SIZE _LOCAL_RANK _LOCAL_SIZE _NODE_RANK
 *   "pmi"      PMI_RANK PMI_SIZE (MPICH, Intel MPI), local rank and size from
 *              PMI_LOCAL_RANK PMI_LOCAL_SIZE (Cray PALS), else
 *              MPI_LOCALRANKID MPI_LOCALNRANKS (Hydra)
 *   "slurm"    SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_NODEID
 *              SLURM_NNODES, local_size from SLURM_STEP_TASKS_PER_NODE,
 *              master = the first host of SLURM_STEP_NODELIST (else
 *              SLURM_JOB_NODELIST), in host-list syntax such as
 *              "node[01-04,07]" or "a[1-2]-ib,b3"
 * With none, a process is rank 0 of 1 and source is "none". A source that
 * sets only one of its rank and size is an error unless another one wins.
 *
 * The master (master_addr:master_port, where rank 0 serves the rendezvous
 * store) under "openmpi", "pmi" and "slurm" is MASTER_ADDR and MASTER_PORT
 * where set. Otherwise: under SLURM the first host above, and the port
 * 20000 + SLURM_JOB_ID % 40000 (set MASTER_PORT for concurrent steps of one
 * job); under Open MPI and PMI, 127.0.0.1 when every rank is on this node
 * (local_size == size), with the port 20000 + FNV-1a-64(id) % 40000 of a
 * job id (Open MPI: PMIX_NAMESPACE, OMPI_MCA_orte_ess_jobid,
 * OMPI_MCA_ess_base_jobid; PMI: PMIX_NAMESPACE, PALS_APID, PMI_PORT); across
 * nodes gang_create asks for MASTER_ADDR and MASTER_PORT. Under "gang" the
 * master is the host and port of a tcp:// GANG_INIT_METHOD, or MASTER_ADDR
 * and MASTER_PORT when GANG_INIT_METHOD is "env://".
 * ======================================================================== */

/** What gang_env_detect found; -1 where unknown. */
typedef struct gang_env {
  size_t struct_size;
  int32_t rank, size;
  int32_t local_rank, local_size;
  int32_t node_rank, num_nodes;
  int32_t master_port;
  int32_t reserved0;
  char master_addr[256]; /* "" if unknown */
  char source[16];       /* "gang", "torchrun", "slurm", "openmpi", "pmi", "none" */
} gang_env_t;

GANG_API void gang_env_init_v(gang_env_t* env, size_t struct_size);

static inline void gang_env_init(gang_env_t* env) {
  gang_env_init_v(env, sizeof *env);
}

/** Reads the launch environment into *out (initialise it with
 *  gang_env_init; the struct follows the size rules of gang_options_t).
 *  Returns GANG_ERR_INVALID_ARGUMENT naming the variables if the winning
 *  source is broken: only one of a pair (local rank and size, node rank and
 *  count) set, a non-numeric or negative value, a size of 0, rank >= size,
 *  local_rank >= local_size, node_rank >= num_nodes, a malformed host list
 *  or MASTER_PORT; and, when no source wins, if one sets only one of its
 *  rank and size. *out is written only on success. */
GANG_API gang_status_t gang_env_detect(gang_env_t* out);

/* ========================================================================
 * Work
 * ======================================================================== */

/** Waits for an operation. timeout_ms -1 waits until it ends (bounded by the
 *  gang's timeout, counted from issue); >= 0 waits at most that long and
 *  returns GANG_IN_PROGRESS if it has not ended (0 polls). Returns the
 *  operation's status; a failure's message is copied to this thread's last
 *  error. Can be called repeatedly. Deadlines hold on every path: an
 *  operation that has not ended 2 s after its deadline (issue + the gang's
 *  timeout) is GANG_ERR_TIMEOUT, and fails the gang, whichever timeout_ms
 *  the caller polls with. */
GANG_API gang_status_t gang_work_wait(gang_work_t* work, int64_t timeout_ms);

/** GANG_OK, GANG_IN_PROGRESS or the operation's error, without waiting.
 *  Polling also makes progress: an operation only the poller drives (a send
 *  or receive) completes under polling alone, and one past its deadline
 *  becomes GANG_ERR_TIMEOUT exactly as in gang_work_wait. */
GANG_API gang_status_t gang_work_test(gang_work_t* work);

/** Frees a work handle, waiting first if the operation is still running.
 *  NULL is a no-op. */
GANG_API gang_status_t gang_work_destroy(gang_work_t* work);

GANG_END_DECLS

#endif /* GANG_H */

/*
 * gang_backend.h - the table a backend module exports.
 *
 * Introduction
 * ============
 * A backend module is a shared library, libgang-<name>.so, that adds a
 * backend to gang without rebuilding it (NCCL is one: libgang-nccl.so). It
 * exports one function, gang_backend_plugin, which returns a static
 * gang_backend_t: a versioned table of plain C functions. gang loads the
 * module the first time a gang asks for <name> (or lists the backends for
 * "auto"), checks the table, and from then on treats the backend like a
 * built-in one: every operation it receives has been validated, numbered and
 * given a deadline by gang's core, so a module only moves and reduces data.
 *
 * Where gang looks: each directory of GANG_PLUGIN_PATH (colon-separated), then
 * <libdir>/gang/, where <libdir> holds libgang.so. The first directory that
 * has the file decides; a file that is found but cannot be used (dlopen
 * fails, no gang_backend_plugin symbol, another ABI version, a table whose
 * name is not <name>) is GANG_ERR_UNAVAILABLE naming the file and the reason.
 * gang loads a module with dlopen(RTLD_NOW | RTLD_LOCAL) once per process and
 * never unloads a module that loaded.
 *
 * Reading order: versions and the entry point, the enums, the store, the
 * configuration, one operation, the table.
 *
 * Conventions
 * -----------
 * - Everything here is C99 and C++; a module needs this header and nothing
 *   of gang's at link time (it may link libgang, e.g. for gang_free).
 * - Structs start with struct_size, have no implicit padding, and grow only
 *   at their end. The side that fills a struct sets struct_size to the size
 *   it knows; the side that reads it reads only fields that lie within
 *   struct_size, and treats fields beyond it as zero/NULL.
 * - Functions that can fail return gang_status_t and write a message into
 *   (err, err_len): NUL-terminated, at most err_len bytes including the NUL,
 *   without the module's name (gang prefixes it: "<name>: <message>"). The
 *   statuses mean what gang.h says; pick the one a user of gang should see
 *   (GANG_ERR_TIMEOUT at a deadline, GANG_ERR_PEER_LOST when a peer went
 *   away, GANG_ERR_ABORTED after abort, GANG_ERR_UNAVAILABLE when a library
 *   or device is missing).
 * - No function may let a C++ exception or a longjmp out, and none may call
 *   exit() or abort() on an error: report it and let gang fail the gang.
 * - Enum fields of the structs are int32_t holding the enum's values, so the
 *   layout does not depend on the compiler's enum size.
 */
#ifndef GANG_BACKEND_H
#define GANG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gang/gang.h"

GANG_BEGIN_DECLS

/* ========================================================================
 * Versions and the entry point
 * ======================================================================== */

/** The version of this interface. A change that old modules cannot keep up
 *  with (a changed meaning, a removed or reordered field) increments it;
 *  gang refuses a module whose gang_backend_t.abi_version differs, naming
 *  both versions. Appending fields at the end of a struct does not change
 *  it (struct_size tells who knows what). */
#define GANG_BACKEND_ABI_VERSION 1

/** The name of the symbol every module exports (see gang_backend_plugin). */
#define GANG_BACKEND_ENTRY "gang_backend_plugin"

/** Marks a module's entry point for export when the module is built with
 *  hidden visibility. */
#if defined(__GNUC__) || defined(__clang__)
#define GANG_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define GANG_BACKEND_EXPORT
#endif

typedef struct gang_backend gang_backend_t;

/** The entry point a module defines and exports:
 *
 *    GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin(void) {
 *      return &my_table;
 *    }
 *
 *  Returns the module's table, which must stay valid and unchanged while
 *  the module is loaded (a static const object). Called once per process,
 *  right after dlopen, from any thread; it should do nothing else: loading
 *  libraries or opening devices belongs in probe and create. NULL means the
 *  module cannot be used (GANG_ERR_UNAVAILABLE). */
GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin(void);

/** The type of gang_backend_plugin, for dlsym. */
typedef const gang_backend_t* (*gang_backend_plugin_fn)(void);

/* ========================================================================
 * Enums
 * ======================================================================== */

/** The kind of one operation (gang_backend_op_t.kind), one per collective of
 *  gang.h. Append-only. */
typedef enum gang_backend_opkind {
  GANG_BACKEND_OP_ALL_REDUCE = 0,
  GANG_BACKEND_OP_REDUCE = 1,
  GANG_BACKEND_OP_BROADCAST = 2,
  GANG_BACKEND_OP_ALL_GATHER = 3,
  GANG_BACKEND_OP_ALL_GATHERV = 4,
  GANG_BACKEND_OP_GATHER = 5,
  GANG_BACKEND_OP_SCATTER = 6,
  GANG_BACKEND_OP_REDUCE_SCATTER = 7,
  GANG_BACKEND_OP_REDUCE_SCATTERV = 8,
  GANG_BACKEND_OP_ALL_TO_ALL = 9,
  GANG_BACKEND_OP_ALL_TO_ALLV = 10,
  GANG_BACKEND_OP_BARRIER = 11,
  GANG_BACKEND_OP_SEND = 12,
  GANG_BACKEND_OP_RECV = 13,
  GANG_BACKEND_OPKIND_FORCE_32BIT = 0x7fffffff
} gang_backend_opkind_t;

/** The tag space an operation travels in (gang_backend_op_t.channel). A
 *  module must keep the three apart on the wire: the same seq may be in
 *  flight in two channels at once. Append-only. */
typedef enum gang_backend_channel {
  /* The user's operations. */
  GANG_BACKEND_CHANNEL_DATA = 0,
  /* The debug check of a data operation (GANG_DEBUG=detail): a small
   * collective describing data operation `seq`, run before it. */
  GANG_BACKEND_CHANNEL_FINGERPRINT = 1,
  /* gang's own traffic: byte payloads, split bookkeeping, barriers. Only
   * backends with GANG_BACKEND_HOST_MEMORY see it; gang opens a host backend
   * of its own beside the others. */
  GANG_BACKEND_CHANNEL_CONTROL = 2,
  GANG_BACKEND_CHANNEL_FORCE_32BIT = 0x7fffffff
} gang_backend_channel_t;

/* ---- capability flags (gang_backend_t.flags) ----------------------------- */

/** Buffers are host memory, so gang runs its control channel over this
 *  backend. Without it gang opens a host backend beside it for that
 *  traffic. */
#define GANG_BACKEND_HOST_MEMORY (1u << 0)
/** Sends and receives are matched by (peer, tag) and may be posted the moment
 *  they are issued, while collectives are in flight. Without it gang posts
 *  point-to-point operations in issue order with everything else, and may
 *  refuse tags other than 0 (as NCCL has none). */
#define GANG_BACKEND_TAGGED_P2P (1u << 1)
/** Operations are enqueued on a device stream (gang_backend_op_t.stream);
 *  their work completes with the stream. */
#define GANG_BACKEND_STREAM_ORDERED (1u << 2)
/** One process stands in for every rank (like gang_create_fake): there are
 *  no peers, so gang refuses point-to-point and gang_split. */
#define GANG_BACKEND_EMULATES_PEERS (1u << 3)

/* ========================================================================
 * The rendezvous store
 * ======================================================================== */

/** The store of the gang being created, as callbacks. Keys are already
 *  prefixed for this gang (and its generation), so a module may use short
 *  fixed names ("unique_id", "addr/3") without clashing with another gang,
 *  a split of this one or an earlier gang of the same name. Values are
 *  bytes of any length up to 1 GiB; keys are non-empty, at most 4096 bytes.
 *
 *  Threads: every callback may be called from any thread, concurrently, until
 *  destroy returns. Each blocks at most for its timeout (set, add and remove
 *  for the gang's timeout). Errors: GANG_ERR_TIMEOUT, GANG_ERR_STORE (the
 *  server is unreachable or answered wrongly), GANG_ERR_INVALID_ARGUMENT (a
 *  bad key or value, a NULL pointer), GANG_ERR_NO_MEMORY, with a message in
 *  (err, err_len). No callback raises an exception or keeps the pointers it
 *  is given. */
typedef struct gang_backend_store {
  /** Passed as the first argument of every callback. */
  void* ctx;
  /** Sets key to the len bytes at data (data may be NULL when len is 0),
   *  replacing any earlier value. */
  gang_status_t (*set)(void* ctx, const char* key, const void* data, size_t len,
                       char* err, size_t err_len);
  /** Waits up to timeout_ms (< 0: the gang's timeout; 0 is
   *  GANG_ERR_INVALID_ARGUMENT, as a networked store cannot answer without a
   *  round trip) for key, then returns a copy of its value in *data,
   *  allocated with malloc (never NULL on success, even for an empty value;
   *  free it with free() or gang_free), and its length in *len.
   *  GANG_ERR_TIMEOUT if the key did not appear in time; *data is then NULL.
   *  Short timeouts (tens of milliseconds) let a module poll, checking its
   *  own abort flag and the operation's deadline between tries. */
  gang_status_t (*get)(void* ctx, const char* key, int64_t timeout_ms,
                       void** data, size_t* len, char* err, size_t err_len);
  /** Atomically adds delta to the decimal integer stored at key (a missing
   *  key counts as 0) and returns the sum in *out (out may be NULL). */
  gang_status_t (*add)(void* ctx, const char* key, int64_t delta, int64_t* out,
                       char* err, size_t err_len);
  /** Deletes key; deleting a missing key is not an error. */
  gang_status_t (*remove)(void* ctx, const char* key, char* err,
                          size_t err_len);
} gang_backend_store_t;

/* ========================================================================
 * Configuration
 * ======================================================================== */

/** What create is given: which rank of which gang, on which device.
 *
 *  Ownership: filled by gang; the struct and everything it points to but the
 *  parent (the strings, the store and its ctx) stay valid until destroy of
 *  the instance made from it returns, so a module may keep the pointers. */
typedef struct gang_backend_config {
  size_t struct_size;    /* sizeof what gang filled in */
  int32_t rank;          /* this process's rank, in [0, size) */
  int32_t size;          /* number of ranks, >= 1 */
  int32_t local_rank;    /* rank among the ranks on this host; -1 unknown */
  int32_t local_size;    /* ranks on this host; -1 unknown */
  int32_t device_type;   /* gang_device_type_t, one the table serves */
  int32_t device_index;  /* device ordinal; -1 on CPU */
  int64_t timeout_ms;    /* the gang's timeout: bounds the rendezvous */
  const char* host_id;   /* equal on ranks that can share memory; never NULL */
  const char* gang_name; /* for messages ("root/split1.0"); may be "" */
  /* The gang's rendezvous; NULL when size is 1 (nothing to meet). Create is
   * collective: every rank of the gang calls it at about the same time. */
  const gang_backend_store_t* store;
  /* A split: the instance of the parent gang when it is an instance of this
   * same module, else NULL. Only the ranks of the new gang call create (with
   * this gang's store), so a module may share resources with the parent but
   * not run a split that needs every parent rank; it may also ignore parent,
   * color and key. The parent stays alive during create, but may be
   * destroyed before this instance. */
  void* parent;
  int32_t color; /* the split's color (>= 0); -1 for a gang not split */
  int32_t key;   /* this rank's key in the split (ranks ordered by key) */
} gang_backend_config_t;

/* ========================================================================
 * One operation
 * ======================================================================== */

/** One operation as gang's core has validated it: every pointer, count,
 *  dtype, op, root and peer is in range, the dtype/op pair passed supports(),
 *  and the buffers are the caller's (device memory for device backends).
 *  The semantics of each kind are those of the gang.h function of the same
 *  name, on the buffers below.
 *
 *  Ownership: the struct and the count arrays are valid only during post();
 *  a module copies what it needs. The buffers send and recv are borrowed
 *  until the operation's work ends (or post returns with *work NULL). */
typedef struct gang_backend_op {
  size_t struct_size; /* sizeof what gang filled in; see gang_backend_op_at */
  int32_t kind;       /* gang_backend_opkind_t */
  int32_t dtype;      /* gang_dtype_t */
  int32_t op;         /* gang_op_t; GANG_SUM for kinds that do not reduce */
  /* The root of REDUCE, BROADCAST, GATHER and SCATTER, or the peer of SEND
   * and RECV (never this rank); 0 otherwise. */
  int32_t root;
  /* SEND / RECV: the user's tag in [0, GANG_TAG_MAX]; messages between one
   * pair with equal tags match in issue order. 0 otherwise. */
  int32_t tag;
  int32_t channel; /* gang_backend_channel_t */
  /* Input. ALL_REDUCE, REDUCE, ALL_GATHER, GATHER, ALL_TO_ALL(V),
   * REDUCE_SCATTER(V), SEND; SCATTER at the root. BROADCAST passes its one
   * buffer as both send and recv. In-place forms (gang.h) pass overlapping
   * send and recv. May be NULL for a count of 0 and where unused. */
  const void* send;
  /* Output: count elements (ALL_REDUCE, BROADCAST: the buffer on every rank,
   * holding the input at the root; REDUCE at the root; SCATTER; RECV),
   * size*count (ALL_GATHER; GATHER at the root; ALL_TO_ALL), the sum of
   * recv_counts (ALL_GATHERV, ALL_TO_ALLV), recv_counts[rank]
   * (REDUCE_SCATTERV). REDUCE off the root: NULL or scratch. */
  void* recv;
  /* Elements: per rank (ALL_REDUCE, REDUCE, BROADCAST, ALL_GATHER, GATHER,
   * SCATTER), the receive count (REDUCE_SCATTER: send holds size*count), per
   * peer (ALL_TO_ALL), the message (SEND, RECV, equal on both sides), this
   * rank's contribution (ALL_GATHERV: recv_counts[rank]). 0 for BARRIER. */
  size_t count;
  /* Per-rank counts, ncounts (the gang size) each: recv_counts for
   * ALL_GATHERV and REDUCE_SCATTERV, both for ALL_TO_ALLV (send_counts[p]
   * elements go to rank p, recv_counts[p] come from it). NULL otherwise. */
  const size_t* send_counts;
  const size_t* recv_counts;
  size_t ncounts;
  /* The number of this operation in its channel: the same on every rank,
   * increasing in issue order (but not necessarily by 1), so it can name the
   * operation on the wire. 0 for SEND and RECV, which only two ranks see. */
  uint64_t seq;
  /* Every wait of the operation ends by then, with GANG_ERR_TIMEOUT: a point
   * on CLOCK_MONOTONIC in nanoseconds (std::chrono::steady_clock on Linux).
   * gang enforces it too, and fails the gang if a work outlives it. */
  int64_t deadline_ns;
  /* The gang's device stream (cudaStream_t as a void*) for
   * GANG_BACKEND_STREAM_ORDERED backends: the one gang_set_cuda_stream
   * named, GANG_BACKEND_LEGACY_STREAM if it named NULL (the legacy default
   * stream), or NULL if the gang set none: the module then uses a stream of
   * its own, which waits for the legacy default stream before the operation
   * reads its input (the caller's work there comes first). NULL for other
   * backends. */
  void* stream;

  /* ---- appended after the first release: read them only when struct_size
   *      covers them ---- */

  /* GANG_BACKEND_STREAM_ORDERED backends: what wait() of this operation's
   * work waits for (gang_backend_completion_t): the host until the work
   * ended (GANG_BACKEND_COMPLETION_HOST, 0), or only that the caller's
   * stream is ordered after it (GANG_BACKEND_COMPLETION_STREAM): wait then
   * returns GANG_OK at once unless the instance failed, and the module
   * keeps timing the work after work_free. 0 for other backends. */
  int32_t completion;
  int32_t reserved; /* 0 */
} gang_backend_op_t;

/** gang_backend_op_t.completion. Append-only. */
typedef enum gang_backend_completion {
  GANG_BACKEND_COMPLETION_HOST = 0,
  GANG_BACKEND_COMPLETION_STREAM = 1,
  GANG_BACKEND_COMPLETION_FORCE_32BIT = 0x7fffffff
} gang_backend_completion_t;

/** gang_backend_op_t.stream when the user chose CUDA's legacy default
 *  stream: the value of cudaStreamLegacy, which CUDA calls accept. */
#define GANG_BACKEND_LEGACY_STREAM ((void*)0x1)

/** Element i of the ops array post() receives. Every element has the same
 *  struct_size, which may exceed the module's sizeof(gang_backend_op_t) when
 *  gang is newer than the module: step by it, not by the module's size. */
static inline const gang_backend_op_t* gang_backend_op_at(
    const gang_backend_op_t* ops, size_t i) {
  return (const gang_backend_op_t*)(const void*)((const char*)ops +
                                                 i * ops->struct_size);
}

/* ========================================================================
 * The table
 * ======================================================================== */

/** A backend module's table, returned by gang_backend_plugin.
 *
 *  Threads: create makes one instance per gang per process. gang posts an
 *  instance's collectives (and, without GANG_BACKEND_TAGGED_P2P, its sends
 *  and receives) one post() at a time, in issue order, so operations match
 *  across ranks in that order. With GANG_BACKEND_TAGGED_P2P, sends and
 *  receives are posted on the issuing thread (one at a time among
 *  themselves), possibly while a collective's post() runs on another.
 *  Different instances are used from different threads concurrently, and
 *  abort and poll_error may come from any thread at any time. A work is
 *  tested, waited for and freed by one thread at a time, not necessarily
 *  the one that posted it; every work is freed before its instance is
 *  destroyed.
 *
 *  Lifecycle of an instance: create, then any number of post (and
 *  test/wait/work_free of their works), then normally either finalize
 *  (orderly: no operation in flight) or abort (at any time, from any
 *  thread, possibly while post or wait runs), then destroy, which must also
 *  cope with neither having been called. */
struct gang_backend {
  size_t struct_size;    /* sizeof(gang_backend_t) as the module knows it */
  uint32_t abi_version;  /* GANG_BACKEND_ABI_VERSION */
  uint32_t device_types; /* bit (1u << gang_device_type_t) per device served */
  /* The backend's name: [a-z0-9_]+, equal to the <name> of the module's
   * file libgang-<name>.so; what gang_backend_name() reports. */
  const char* name;
  /* "auto" picks the usable backend of highest priority for the device
   * (the built-in Gloo has 10); negative: only when asked for by name. */
  int32_t priority;
  uint32_t flags; /* GANG_BACKEND_* capability flags; unknown bits ignored */

  /** Whether the backend can be used in this process (its libraries load, a
   *  device exists), without creating anything. Returns 0 if usable, else
   *  nonzero with the reason in (why, why_len), which gang reports as
   *  GANG_ERR_UNAVAILABLE naming the module's file. May be NULL: always
   *  usable. Called from any thread, at most once per gang creation. */
  int (*probe)(char* why, size_t why_len);

  /** Creates this rank's instance for a gang: collective over the gang's
   *  ranks (they rendezvous through config->store); blocks until every rank
   *  joined or config->timeout_ms passed. On success *backend is the
   *  instance (non-NULL). Errors: GANG_ERR_TIMEOUT, GANG_ERR_STORE,
   *  GANG_ERR_UNAVAILABLE (the device or a library is missing),
   *  GANG_ERR_SYSTEM, GANG_ERR_NO_MEMORY; *backend is then not used. */
  gang_status_t (*create)(const gang_backend_config_t* config, void** backend,
                          char* err, size_t err_len);

  /** Frees an instance: normally after finalize or abort, always after its
   *  last work was freed. Local: never waits for peers. */
  void (*destroy)(void* backend);

  /** Nonzero if the instance can reduce dtype with op (ALL_REDUCE, REDUCE,
   *  REDUCE_SCATTER(V)). Answers without traffic; gang asks before issuing
   *  a reduction and reports GANG_ERR_UNSUPPORTED to the user, leaving the
   *  gang usable. gang never asks about, nor posts, AVG of a type that is
   *  not floating (it refuses that itself). Called from any thread. */
  int (*supports)(void* backend, gang_op_t op, gang_dtype_t dtype);

  /** Posts nops operations (nops >= 1; element i is gang_backend_op_at(ops,
   *  i)). nops > 1 is a group: every operation starts before any is waited
   *  for, so both sides of an exchange may send first, and one work covers
   *  them all.
   *
   *  A synchronous backend runs the operations here and sets *work = NULL
   *  (finished; the caller's thread did the work, nothing else to free). An
   *  asynchronous one sets *work to a handle of its own for test, wait and
   *  work_free. Blocks at most until the operations' deadline.
   *
   *  Returns GANG_OK (check *work), or the error that ended the operations:
   *  GANG_ERR_TIMEOUT, GANG_ERR_PEER_LOST, GANG_ERR_ABORTED (after abort),
   *  GANG_ERR_UNSUPPORTED (a kind the backend lacks), GANG_ERR_MISMATCH (a
   *  peer's data of another length), GANG_ERR_SYSTEM, GANG_ERR_INTERNAL.
   *  Any error fails the gang; *work is then not used. */
  gang_status_t (*post)(void* backend, const gang_backend_op_t* ops,
                        size_t nops, void** work, char* err, size_t err_len);

  /** Without blocking for long: GANG_OK once the work ended well,
   *  GANG_IN_PROGRESS while it runs, or the error that ended it (past its
   *  deadline GANG_ERR_TIMEOUT, after abort GANG_ERR_ABORTED). Once ended,
   *  every later call returns the same status. */
  gang_status_t (*test)(void* work, char* err, size_t err_len);

  /** Waits until the work ends or until_ns (CLOCK_MONOTONIC nanoseconds),
   *  whichever is first: GANG_OK, GANG_IN_PROGRESS at until_ns, or the error,
   *  as test. Must return promptly after abort. */
  gang_status_t (*wait)(void* work, int64_t until_ns, char* err,
                        size_t err_len);

  /** Frees a work; it has ended (or its instance was aborted). */
  void (*work_free)(void* work);

  /** An error the instance noticed on its own (a device fault, a lost peer
   *  seen by a progress thread), GANG_OK if none. Never blocks; called from
   *  any thread, including a watchdog of gang's. May be NULL. */
  gang_status_t (*poll_error)(void* backend, char* err, size_t err_len);

  /** Orderly teardown once nothing is in flight: waits (bounded by the
   *  gang's timeout) for what the instance still owes its peers. Not called
   *  after abort. May be NULL. */
  void (*finalize)(void* backend);

  /** Makes everything in flight on the instance, on any thread, end promptly
   *  with GANG_ERR_ABORTED (post, wait and test included), and every later
   *  post fail with it; tells the peers where it can without blocking.
   *  Thread-safe, prompt (never waits for peers) and idempotent. */
  void (*abort)(void* backend);

  /* ---- appended after the first release: gang reads these only when
   *      struct_size covers them ---- */

  /** A native split (as ncclCommSplit): the new gang's instance made from
   *  the parent instance's own state. Called on every rank of the parent
   *  gang, in the new gang or not, at the same point of the parent's
   *  operation order (no post() of the parent runs meanwhile); collective
   *  like create, and bounded by config->timeout_ms.
   *
   *  config describes the new gang as create's does, with parent set to the
   *  parent instance. On a rank that stays out of it, color is -1, rank -1,
   *  size 0 and store NULL, and *backend must stay NULL. Returning
   *  GANG_ERR_UNSUPPORTED (alike on every rank: the library is too old, say)
   *  makes gang call create on the members instead; any other error fails
   *  the parent gang. May be NULL: gang always calls create. */
  gang_status_t (*split)(void* parent, const gang_backend_config_t* config,
                         void** backend, char* err, size_t err_len);

  /** The device ordinal the instance runs on, as create resolved it (from
   *  config->device_index, or the module's choice when that was -1); what
   *  gang_device_index() reports. May be NULL: gang reports the ordinal it
   *  asked for. */
  int32_t (*device_index)(void* backend);

  /** A shrink (as ncclCommShrink): the new gang of the parent's survivors,
   *  made from the parent instance's own state. Called on every surviving
   *  rank of the parent, which may have failed or been aborted; excluded
   *  lists the nexcluded parent ranks left out, in increasing order (none
   *  of them calls). config describes the new gang as create's does (its
   *  rank among the survivors, in the order of their parent ranks; its
   *  store, for a rendezvous if the module needs one), with parent set to
   *  the parent instance and color -1. Collective over the survivors and
   *  bounded by config->timeout_ms. GANG_ERR_UNSUPPORTED (alike on every
   *  survivor) makes gang call create on the survivors instead. May be
   *  NULL: gang always calls create. */
  gang_status_t (*shrink)(void* parent, const int32_t* excluded,
                          size_t nexcluded,
                          const gang_backend_config_t* config, void** backend,
                          char* err, size_t err_len);
};

GANG_END_DECLS

#endif /* GANG_BACKEND_H */

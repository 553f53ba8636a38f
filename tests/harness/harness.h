/*
 * harness.h - the multi-process test harness and the reference arithmetic
 * shared by gang's tests.
 *
 * Multi-rank tests run real processes over loopback TCP. The parent (the
 * cmocka test) serves a TCP store on a free port, forks one child per rank,
 * and each child opens its own client store, creates a gang, runs the rank
 * function and exits with its result. The parent waits with a wall-clock
 * limit, kills ranks that hang, and reports which ranks failed and how.
 *
 * Rank functions must not use cmocka assertions (they run in a child): they
 * use CHECK / CHECK_OK, which print the rank, file:line and a message to
 * stderr and return nonzero from the function.
 */
#ifndef GANG_TEST_HARNESS_H
#define GANG_TEST_HARNESS_H

#include <gang/gang.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit code that CTest reports as "skipped". */
#define GANG_TEST_SKIP 77

/* ---- parallel configurations ------------------------------------------- */

/* Degrees of a layout, as designated initialisers: 0 and a NULL order keep
 * gang's defaults. */
typedef struct gang_test_degrees {
  int tp, cp, pp, dp, ep, sdp;
  const char* order;
} gang_test_degrees_t;

/* An initialised gang_parallel_config_t with those degrees. */
gang_parallel_config_t gang_test_parallel_config(gang_test_degrees_t d);

/* ---- running ranks ------------------------------------------------------ */

/* A rank function with a gang: returns 0 on success. */
typedef int (*gang_test_fn)(gang_t* g, int rank, int size, void* arg);

/* A rank function without a gang: store_url is the harness's TCP store
 * ("tcp://127.0.0.1:PORT"), which the function may open as a client. */
typedef int (*gang_test_plain_fn)(int rank, int size, const char* store_url,
                                  void* arg);

/* Runs `size` ranks of fn, each with a gang of `backend` ("gloo" if NULL)
 * made through the harness's store with the given gang timeout. Returns 0
 * when every rank passed, nonzero otherwise (after printing which ranks
 * failed, how, and which hung past wall_timeout_s). */
int gang_test_run_ranks(int size, const char* backend, gang_test_fn fn,
                        void* arg, int64_t gang_timeout_ms,
                        int wall_timeout_s);

/* Runs `size` processes of fn without a gang. */
int gang_test_run_procs(int size, gang_test_plain_fn fn, void* arg,
                        int wall_timeout_s);

/* Everything the two calls above do, and more. Fill with
 * gang_test_opts_init. */
typedef struct gang_test_opts {
  int size;
  const char* backend;       /* NULL: "gloo" */
  gang_test_fn fn;           /* one of fn / plain_fn */
  gang_test_plain_fn plain_fn;
  void* arg;
  int64_t gang_timeout_ms;   /* <= 0: 30000 */
  int wall_timeout_s;        /* <= 0: 60 */
  const char* store_url;     /* NULL: the harness serves a fresh store */
  /* Runs in the parent once every rank is forked (e.g. to kill one). */
  void (*parent_fn)(const pid_t* pids, int size, void* arg);
  /* A rank the test kills with SIGKILL on purpose: dying of SIGKILL counts
   * as passing for it. -1 for none. */
  int killed_rank;
  /* A second such rank, or -1. */
  int killed_rank2;
} gang_test_opts_t;

void gang_test_opts_init(gang_test_opts_t* o);
int gang_test_run(const gang_test_opts_t* o);

/* ---- inside a rank ------------------------------------------------------ */

/* The rank of this process (-1 in the parent). */
int gang_test_rank(void);

/* A zeroed region shared by the parent and every rank of the current run,
 * GANG_TEST_SHARED_BYTES long; reset before each run. */
#define GANG_TEST_SHARED_BYTES 65536
volatile void* gang_test_shared(void);
/* Its first GANG_TEST_SHARED_INTS slots as 64-bit integers. */
#define GANG_TEST_SHARED_INTS 1024
volatile int64_t* gang_test_shared_ints(void);

/* Waits until shared int `slot` equals value (up to timeout_ms); 0 if it
 * did, -1 on timeout. */
int gang_test_wait_shared(int slot, int64_t value, int64_t timeout_ms);

/* Kills `rank` with SIGKILL (parent side). */
void gang_test_kill(const pid_t* pids, int rank);

/* Monotonic clock in milliseconds (the same clock in every process). */
int64_t gang_test_now_ms(void);
void gang_test_sleep_ms(int64_t ms);

/* Prints "[rank R] file:line: check `cond` failed: <message> (last error:
 * ...)" to stderr. Used by CHECK. */
void gang_test_report(const char* file, int line, const char* cond,
                      const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      gang_test_report(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
      return 1;                                                  \
    }                                                            \
  } while (0)

/* Checks that a gang call returned GANG_OK. */
#define CHECK_OK(expr)                                                   \
  do {                                                                   \
    gang_status_t check_ok_s_ = (expr);                                  \
    if (check_ok_s_ != GANG_OK) {                                        \
      gang_test_report(__FILE__, __LINE__, #expr, "returned %s",         \
                       gang_status_name(check_ok_s_));                   \
      return 1;                                                          \
    }                                                                    \
  } while (0)

/* Checks that a gang call returned the given status. */
#define CHECK_STATUS(expr, want)                                         \
  do {                                                                   \
    gang_status_t check_st_s_ = (expr);                                  \
    if (check_st_s_ != (want)) {                                         \
      gang_test_report(__FILE__, __LINE__, #expr,                        \
                       "returned %s, expected %s",                       \
                       gang_status_name(check_st_s_),                    \
                       gang_status_name(want));                          \
      return 1;                                                          \
    }                                                                    \
  } while (0)

/* ---- reference arithmetic ------------------------------------------------ */

/* IEEE binary16 and bfloat16 conversions written for the tests:
 * float -> half/bf16 rounds to nearest, ties to even. */
uint16_t ref_float_to_half(float f);
float ref_half_to_float(uint16_t h);
uint16_t ref_float_to_bf16(float f);
float ref_bf16_to_float(uint16_t b);

/* Element size of each dtype, known to the test independently. */
size_t ref_dtype_size(gang_dtype_t dt);
const char* ref_dtype_name(gang_dtype_t dt);
const char* ref_op_name(gang_op_t op);
int ref_dtype_is_float(gang_dtype_t dt);
/* Whether op reduces dt: every pair but AVG of a type that is not floating
 * (bool and the integers: GANG_ERR_UNSUPPORTED). */
int ref_reducible(gang_dtype_t dt, gang_op_t op);
int ref_dtype_is_signed(gang_dtype_t dt);

#define REF_NUM_DTYPES 12
#define REF_NUM_OPS 5
extern const gang_dtype_t ref_dtypes[REF_NUM_DTYPES];
extern const gang_op_t ref_ops[REF_NUM_OPS];

/* Elements are handled as their raw bits, zero-extended to 64 bits. */
uint64_t ref_load(gang_dtype_t dt, const void* buf, size_t i);
void ref_store(gang_dtype_t dt, void* buf, size_t i, uint64_t bits);

/* The bits of a real number in dtype: integers by wrapping truncation of
 * (int64_t)v, floats by rounding to nearest even. */
uint64_t ref_from_double(gang_dtype_t dt, double v);
/* The bits of a 64-bit integer in dtype (truncated, wrapping). */
uint64_t ref_from_int(gang_dtype_t dt, int64_t v);
/* The value of bits in dtype, as a double (integers may lose precision). */
double ref_to_double(gang_dtype_t dt, uint64_t bits);

/* One reduction step a op b, rounded to the dtype (floats computed in
 * float32 for 16-bit types and float32, in float64 for float64; integers
 * wrap). AVG steps are SUM steps (floating types only). */
uint64_t ref_reduce(gang_dtype_t dt, gang_op_t op, uint64_t a, uint64_t b);
/* The AVG finish of a floating type: divides in float32 (float64) and
 * rounds. Other ops: identity. */
uint64_t ref_finish(gang_dtype_t dt, gang_op_t op, uint64_t v, int n);

/* Formats bits for messages ("-3", "1.5 (0x3e00)"). */
const char* ref_format(gang_dtype_t dt, uint64_t bits, char* buf,
                       size_t len);

/* FNV-1a over bytes, chained through h. */
uint64_t ref_hash(uint64_t h, const void* data, size_t n);
#define REF_HASH_INIT 0xcbf29ce484222325ull

#ifdef __cplusplus
}
#endif

#endif /* GANG_TEST_HARNESS_H */

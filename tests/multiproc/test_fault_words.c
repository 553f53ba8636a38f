/*
 * test_fault_words.c - the same fault reads the same on every backend.
 *
 * Four ranks meet a mismatch (rank 3 passes twice the count), a timeout
 * (rank 3 never calls) and a lost peer (rank 3 is killed) in an all-reduce,
 * on shm, on gloo and on two levels (two hosts: ranks 0 and 2 on one, 1 and
 * 3 on the other, so rank 3's fault is within rank 1's host). Rank 1 is the
 * witness: its message must say the fault in the same words on the three,
 * naming the ranks in the gang's own numbering (on two levels the host's
 * gang numbers them 0 and 1, and the words must still say 1 and 3), and on
 * two levels end with where it happened. A mismatch reads the same when
 * the witness comes to the operation late (after rank 3 found it with
 * another rank): the rank that finds one lets what it already said reach
 * its partners before it leaves.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define RANKS 4
#define TIMEOUT_MS 1500
#define COUNT 4
#define READY_SLOT 0
#define TEXT_AT 4096 /* where rank 1 leaves its message in the shared region */
#define LATE_MS 100  /* how late the witness comes to a late mismatch */

typedef enum fault { MISMATCH, LATE_MISMATCH, TIMEOUT, LOST } fault_t;

typedef struct run_arg {
  fault_t fault;
} run_arg_t;

static int run_fault(gang_t* g, int rank, int size, void* arg) {
  const run_arg_t* a = (const run_arg_t*)arg;
  float x[2 * COUNT] = {0};
  gang_status_t s;
  (void)size;
  if (rank == 3 && a->fault == TIMEOUT) {
    /* Never calls: the others time out waiting, then this rank leaves. */
    gang_test_sleep_ms(TIMEOUT_MS + 1500);
    return 0;
  }
  if (rank == 3 && a->fault == LOST) {
    gang_test_shared_ints()[READY_SLOT] = 1;
    for (;;) pause(); /* killed here */
  }
  if (rank == 1 && a->fault == LATE_MISMATCH) gang_test_sleep_ms(LATE_MS);
  s = gang_all_reduce(g, x, x, rank == 3 ? 2 * COUNT : COUNT, GANG_FLOAT32, GANG_SUM, NULL);
  if (rank == 1) {
    char* text = (char*)gang_test_shared() + TEXT_AT;
    snprintf(text, 2048, "%s|%s", gang_status_name(s), gang_last_error());
  }
  return 0;
}

static void kill_rank3(const pid_t* pids, int size, void* arg) {
  (void)size;
  (void)arg;
  if (gang_test_wait_shared(READY_SLOT, 1, 30000) != 0) return;
  gang_test_sleep_ms(500);
  gang_test_kill(pids, 3);
}

/* Runs the fault on `backend` ("two levels": auto over two hosts) and
 * copies rank 1's "STATUS|message" into out. */
static void witness(fault_t fault, const char* backend, char* out, size_t len) {
  gang_test_opts_t o;
  run_arg_t arg = {fault};
  const int two_levels = strcmp(backend, "two levels") == 0;
  gang_test_opts_init(&o);
  o.size = RANKS;
  o.backend = two_levels ? "auto" : backend;
  o.fn = run_fault;
  o.arg = &arg;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = 60;
  if (fault == LOST) {
    o.killed_rank = 3;
    o.parent_fn = kill_rank3;
  }
  if (two_levels) setenv("GANG_TEST_HOSTS", "2", 1);
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_TEST_HOSTS");
  snprintf(out, len, "%s", (const char*)gang_test_shared() + TEXT_AT);
  printf("%-10s | %s\n", backend, out);
}

static const char* const kBackends[] = {"shm", "gloo", "two levels"};

/* The part of `text` from `words` on, or fail naming the backend. */
static const char* find_words(const char* text, const char* words, const char* backend) {
  const char* at = strstr(text, words);
  if (at == NULL) fail_msg("%s: \"%s\" is not in: %s", backend, words, text);
  return at;
}

/* On two levels, rank 3's fault is within rank 1's host, and says so. */
static void check_phase(const char* text, const char* backend) {
  const int two_levels = strcmp(backend, "two levels") == 0;
  const int said = strstr(text, "(within this host)") != NULL;
  if (two_levels != said) {
    fail_msg("%s: %s where the fault happened: %s", backend,
             two_levels ? "does not say" : "says", text);
  }
}

static void check_mismatch(fault_t fault) {
  char text[2048];
  size_t i;
  for (i = 0; i < sizeof kBackends / sizeof kBackends[0]; ++i) {
    int a, b;
    unsigned ca, cb;
    const char* at;
    witness(fault, kBackends[i], text, sizeof text);
    if (strncmp(text, "GANG_ERR_MISMATCH|", 18) != 0) {
      fail_msg("%s: rank 1 did not get a mismatch: %s", kBackends[i], text);
    }
    at = find_words(text, "ranks called different operations: rank ", kBackends[i]);
    /* Either rank may have found it first: the words name both, each with
     * its own count, in the gang's numbering. (On two levels the operation
     * that meets the mismatch is the host's step of the all-reduce.) */
    {
      const char* but = strstr(at, " but rank ");
      if (but == NULL ||
          sscanf(at, "ranks called different operations: rank %d called "
                     "gang_%*[a-z_](float32, count %u, sum", &a, &ca) != 2 ||
          sscanf(but, " but rank %d called gang_%*[a-z_](float32, count %u, sum", &b, &cb) != 2) {
        fail_msg("%s: not the one wording of a mismatch: %s", kBackends[i], at);
      }
    }
    if (a == b || (a != 3 && b != 3)) {
      fail_msg("%s: the mismatch does not name rank 3 and another: %s", kBackends[i], at);
    }
    if (ca != (a == 3 ? 2u * COUNT : (unsigned)COUNT) ||
        cb != (b == 3 ? 2u * COUNT : (unsigned)COUNT)) {
      fail_msg("%s: a rank is named with a count it did not pass (ranks renumbered "
               "wrongly?): %s", kBackends[i], at);
    }
    check_phase(text, kBackends[i]);
  }
}

static void test_mismatch_words(void** state) {
  (void)state;
  check_mismatch(MISMATCH);
}

/* Rank 3 finds the mismatch with rank 0 before rank 1 has come: on gloo
 * its frame to rank 1 had not left (Gloo sends once the receiver has
 * posted its receive) when it closed its connections, and rank 1 read a
 * lost peer instead. */
static void test_late_mismatch_words(void** state) {
  (void)state;
  check_mismatch(LATE_MISMATCH);
}

static void test_timeout_words(void** state) {
  char text[2048];
  size_t i;
  (void)state;
  for (i = 0; i < sizeof kBackends / sizeof kBackends[0]; ++i) {
    witness(TIMEOUT, kBackends[i], text, sizeof text);
    if (strncmp(text, "GANG_ERR_TIMEOUT|", 17) != 0) {
      fail_msg("%s: rank 1 did not time out: %s", kBackends[i], text);
    }
    find_words(text, ": timed out waiting for rank 3 (", kBackends[i]);
    check_phase(text, kBackends[i]);
  }
}

static void test_lost_words(void** state) {
  char text[2048];
  size_t i;
  (void)state;
  for (i = 0; i < sizeof kBackends / sizeof kBackends[0]; ++i) {
    witness(LOST, kBackends[i], text, sizeof text);
    if (strncmp(text, "GANG_ERR_PEER_LOST|", 19) != 0) {
      fail_msg("%s: rank 1 did not lose a peer: %s", kBackends[i], text);
    }
    find_words(text, ": rank 3 is gone (", kBackends[i]);
    check_phase(text, kBackends[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mismatch_words),
      cmocka_unit_test(test_late_mismatch_words),
      cmocka_unit_test(test_timeout_words),
      cmocka_unit_test(test_lost_words),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_flat_addresses.c - the flat gang beside two levels reads a peer's
 * listening address on first contact, not everybody's at creation.
 *
 * 6 ranks play 2 hosts (rank r on host r % 2) and create a gang on two
 * levels (shm within a host, gloo between them). Its flat gloo gang, which
 * runs what the levels do not (point to point, all-to-all), publishes each
 * rank's address and no list of them: after creation the store holds the
 * gang's "lasting/<r>" for every rank but 0 (nobody connects to rank 0) and
 * no "backend/flat/all". A ring of sends across hosts and an all-to-all
 * then connect on those addresses, read on first use. Once every rank
 * destroyed the gang, no address is left in the store.
 *
 * A second gang finds one address spoiled before anybody read it (rank 0
 * overwrites rank 3's with 5 bytes): rank 2, the first to connect to rank
 * 3, fails at once with GANG_ERR_PEER_LOST naming the listening address,
 * and rank 3, waiting to be connected to, at its timeout.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

enum { kRanks = 6, kHosts = 2 };

static int create_on_two_hosts(gang_store_t* store, const char* name, int rank,
                               int64_t timeout_ms, gang_t** g) {
  gang_options_t o;
  char host[64];
  snprintf(host, sizeof host, "flat-addresses-host-%d", rank % kHosts);
  setenv("GANG_HOST_ID", host, 1);
  gang_options_init(&o);
  o.name = name;
  o.rank = rank;
  o.size = kRanks;
  o.store = store;
  o.timeout_ms = timeout_ms;
  CHECK_OK(gang_create(&o, g));
  CHECK(strchr(gang_backend_name(*g), '+') != NULL, "the gang is on %s, not two levels",
        gang_backend_name(*g));
  return 0;
}

/* Whether `key` is in the store: a get through `quick`, a client whose
 * timeout is short, finds it or times out. */
static int present(gang_store_t* quick, const char* key) {
  void* v = NULL;
  size_t n = 0;
  const gang_status_t s = gang_store_get(quick, key, &v, &n);
  if (s == GANG_OK) gang_free(v);
  return s == GANG_OK;
}

static int addresses_on_first_use(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_store_t* quick = NULL;
  gang_t* g = NULL;
  char key[128];
  int64_t ring_out = 1000 + rank, ring_in = -1;
  int64_t all_in[kRanks], all_out[kRanks];
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int r;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, 60000, &store));
  CHECK_OK(gang_store_create(url, 0, 200, &quick));
  if (create_on_two_hosts(store, "root", rank, 60000, &g) != 0) return 1;
  /* The harness's store is fresh: the gang met in its generation 1. */
  CHECK(!present(quick, "gang/root/1/backend/flat/all"),
        "the flat gang published a list of every rank's address");
  for (r = 1; r < size; ++r) {
    snprintf(key, sizeof key, "gang/root/1/lasting/%d", r);
    CHECK(present(quick, key), "rank %d's listening address is not in the store (%s)", r, key);
  }
  CHECK(!present(quick, "gang/root/1/lasting/0"),
        "rank 0 published its address, which nobody reads");
  /* Each send crosses hosts: next is on the other one. */
  CHECK_OK(gang_group_start(g));
  CHECK_OK(gang_send(g, &ring_out, 1, GANG_INT64, next, 7, NULL));
  CHECK_OK(gang_recv(g, &ring_in, 1, GANG_INT64, prev, 7, NULL));
  CHECK_OK(gang_group_end(g, NULL));
  CHECK(ring_in == 1000 + prev, "received %lld from rank %d", (long long)ring_in, prev);
  for (r = 0; r < size; ++r) all_in[r] = rank * 100 + r;
  CHECK_OK(gang_all_to_all(g, all_in, all_out, 1, GANG_INT64, NULL));
  for (r = 0; r < size; ++r) {
    CHECK(all_out[r] == r * 100 + rank, "all_to_all[%d] = %lld", r, (long long)all_out[r]);
  }
  CHECK_OK(gang_barrier(g, NULL));
  CHECK_OK(gang_destroy(g));
  CHECK_OK(gang_store_add(store, "destroyed", 1, NULL));
  if (rank == 0) {
    /* A rank forgets its address as it destroys the gang. */
    const int64_t until = gang_test_now_ms() + 30000;
    int64_t done = 0;
    while (done < size && gang_test_now_ms() < until) {
      CHECK_OK(gang_store_add(store, "destroyed", 0, &done));
      if (done < size) gang_test_sleep_ms(10);
    }
    CHECK(done == size, "%lld of %d ranks destroyed the gang", (long long)done, size);
    for (r = 0; r < size; ++r) {
      snprintf(key, sizeof key, "gang/root/1/lasting/%d", r);
      CHECK(!present(quick, key), "%s outlived the gang", key);
      snprintf(key, sizeof key, "gang/root/1/backend/flat/%d", r);
      CHECK(!present(quick, key), "%s outlived the gang", key);
    }
  }
  CHECK_OK(gang_store_destroy(quick));
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static int spoiled_address(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_t* g = NULL;
  int64_t x = rank, y = -1;
  (void)size;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, 60000, &store));
  if (create_on_two_hosts(store, "spoiled", rank, 3000, &g) != 0) return 1;
  if (rank == 0) {
    CHECK_OK(gang_store_set(store, "gang/spoiled/1/lasting/3", "bogus", 5));
  }
  /* Nobody connects on the flat gang before the address is spoiled. */
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 2) {
    const int64_t start = gang_test_now_ms();
    const gang_status_t s = gang_send(g, &x, 1, GANG_INT64, 3, 1, NULL);
    const int64_t took = gang_test_now_ms() - start;
    CHECK(s == GANG_ERR_PEER_LOST, "a send on a spoiled address: %s (%s)",
          gang_status_name(s), gang_last_error());
    CHECK(strstr(gang_last_error(), "listening address") != NULL,
          "the failure does not name the address: %s", gang_last_error());
    CHECK(took < 2000, "the send failed after %lld ms, not at once", (long long)took);
  } else if (rank == 3) {
    const gang_status_t s = gang_recv(g, &y, 1, GANG_INT64, 2, 1, NULL);
    CHECK(s == GANG_ERR_TIMEOUT || s == GANG_ERR_PEER_LOST || s == GANG_ERR_ABORTED,
          "a receive from a rank that cannot connect: %s (%s)", gang_status_name(s),
          gang_last_error());
  }
  gang_destroy(g);
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static void test_flat_gang_reads_addresses_on_first_use(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(kRanks, addresses_on_first_use, NULL, 120), 0);
}

static void test_a_spoiled_address_fails_the_first_contact(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(kRanks, spoiled_address, NULL, 120), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flat_gang_reads_addresses_on_first_use),
      cmocka_unit_test(test_a_spoiled_address_fails_the_first_contact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_subgang.c - gang_split and gang_create_subgang over real Gloo gangs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define GANG_TIMEOUT_MS 20000
#define WALL_S 90

/* Checks that `sub` holds exactly `members` (parent ranks, in sub-gang rank
 * order): rank, size, root ranks, and a sum and a gather over it. */
static int check_members(gang_t* parent, gang_t* sub, const int* members,
                         int n) {
  const int me = gang_rank(parent);
  int32_t mine, gathered[64];
  int64_t sum = 0, got = 0, one;
  int i, pos = -1;
  for (i = 0; i < n; ++i) {
    if (members[i] == me) pos = i;
  }
  CHECK(pos >= 0, "this rank (%d) is not a member", me);
  CHECK(sub != NULL, "a member got a NULL sub-gang");
  CHECK(gang_size(sub) == n, "size %d, expected %d", gang_size(sub), n);
  CHECK(gang_rank(sub) == pos, "rank %d, expected %d", gang_rank(sub), pos);
  CHECK(strcmp(gang_backend_name(sub), gang_backend_name(parent)) == 0,
        "backend %s, parent's %s", gang_backend_name(sub), gang_backend_name(parent));
  CHECK(gang_get_timeout(sub) == gang_get_timeout(parent), "timeout %lld, parent's %lld",
        (long long)gang_get_timeout(sub), (long long)gang_get_timeout(parent));
  CHECK(strncmp(gang_name(sub), gang_name(parent), strlen(gang_name(parent))) == 0 &&
            gang_name(sub)[strlen(gang_name(parent))] == '/',
        "name \"%s\" does not extend the parent's \"%s/\"", gang_name(sub),
        gang_name(parent));
  for (i = 0; i < n; ++i) {
    /* members[] are parent ranks; map them to the root of the tree. */
    const int want = gang_root_rank(parent, members[i]);
    CHECK(gang_root_rank(sub, i) == want, "gang_root_rank(sub, %d) = %d, expected %d",
          i, gang_root_rank(sub, i), want);
  }
  CHECK(gang_root_rank(sub, n) == -1 && gang_root_rank(sub, -1) == -1,
        "gang_root_rank out of range is not -1");

  /* A sum over the sub-gang counts only its members. */
  one = (int64_t)me + 1;
  for (i = 0; i < n; ++i) sum += members[i] + 1;
  CHECK_OK(gang_all_reduce(sub, &one, &got, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(got == sum, "sum over the sub-gang is %lld, expected %lld", (long long)got,
        (long long)sum);

  /* Gathering parent ranks gives the members in sub-gang rank order. */
  mine = me;
  CHECK_OK(gang_all_gather(sub, &mine, gathered, 1, GANG_INT32, NULL));
  for (i = 0; i < n; ++i) {
    CHECK(gathered[i] == members[i], "sub rank %d is parent rank %d, expected %d", i,
          gathered[i], members[i]);
  }
  return 0;
}

/* Sorts ranks with `color` by (key, parent rank): the expected order. */
static int expected_members(int size, const int* colors, const int* keys,
                            int color, int* out) {
  int n = 0, i, j;
  for (i = 0; i < size; ++i) {
    if (colors[i] == color) out[n++] = i;
  }
  for (i = 1; i < n; ++i) { /* insertion sort, stable */
    const int v = out[i];
    for (j = i - 1; j >= 0 && keys[out[j]] > keys[v]; --j) out[j + 1] = out[j];
    out[j + 1] = v;
  }
  return n;
}

typedef struct split_case {
  int (*color)(int rank, int size);
  int (*key)(int rank, int size);
} split_case_t;

static int run_split(gang_t* g, int rank, int size, const split_case_t* sc) {
  int colors[64], keys[64], members[64], r, n;
  gang_t* sub = NULL;
  for (r = 0; r < size; ++r) {
    colors[r] = sc->color(r, size);
    keys[r] = sc->key(r, size);
  }
  CHECK_OK(gang_split(g, colors[rank], keys[rank], &sub));
  if (colors[rank] == GANG_COLOR_NONE) {
    CHECK(sub == NULL, "color -1 gave a gang");
  } else {
    char suffix[32];
    const char* name = gang_name(sub);
    n = expected_members(size, colors, keys, colors[rank], members);
    if (check_members(g, sub, members, n)) return 1;
    snprintf(suffix, sizeof suffix, ".%d", colors[rank]);
    CHECK(strstr(name, "/split") != NULL &&
              strcmp(name + strlen(name) - strlen(suffix), suffix) == 0,
          "split name \"%s\" is not <parent>/split<n>.%d", name, colors[rank]);
  }
  CHECK_OK(gang_destroy(sub));
  /* The parent still works. */
  {
    int64_t one = 1, total = 0;
    CHECK_OK(gang_all_reduce(g, &one, &total, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(total == size, "parent sum %lld after the split", (long long)total);
  }
  return 0;
}

static int color_parity(int r, int s) { (void)s; return r % 2; }
static int key_reverse(int r, int s) { (void)s; return -r; }
static int key_zero(int r, int s) { (void)r; (void)s; return 0; }
static int key_half(int r, int s) { (void)s; return (3 - r) / 2; } /* ties */
static int color_all(int r, int s) { (void)r; (void)s; return 0; }
static int color_none_last(int r, int s) { return r == s - 1 ? GANG_COLOR_NONE : 7; }
static int color_big(int r, int s) { (void)s; return r < 2 ? 1000000 : 3; }

static const split_case_t kParityReverse = {color_parity, key_reverse};
static const split_case_t kAllTies = {color_all, key_zero};
static const split_case_t kHalfTies = {color_all, key_half};
static const split_case_t kNoneLast = {color_none_last, key_reverse};
static const split_case_t kBigColors = {color_big, key_zero};

static int rank_split(gang_t* g, int rank, int size, void* arg) {
  return run_split(g, rank, size, (const split_case_t*)arg);
}

static void test_split_parity_reverse_n4(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_split, (void*)&kParityReverse,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}
static void test_split_parity_reverse_n3(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_split, (void*)&kParityReverse,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}
static void test_split_ties_by_parent_rank(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_split, (void*)&kAllTies,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_split, (void*)&kHalfTies,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}
static void test_split_color_none(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_split, (void*)&kNoneLast,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}
static void test_split_large_colors(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_split, (void*)&kBigColors,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

/* color < -1 is refused on every rank before any traffic; the gang stays
 * usable. */
static int rank_split_bad_color(gang_t* g, int rank, int size, void* arg) {
  gang_t* sub = (gang_t*)&sub; /* must be overwritten */
  int64_t one = 1, total = 0;
  (void)rank;
  (void)arg;
  CHECK_STATUS(gang_split(g, -2, 0, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK(sub == NULL, "*out was not set to NULL on failure");
  CHECK(strstr(gang_last_error(), "color") != NULL, "message does not name color");
  CHECK_STATUS(gang_split(g, 0, 0, NULL), GANG_ERR_INVALID_ARGUMENT);
  CHECK_OK(gang_all_reduce(g, &one, &total, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(total == size, "sum %lld after the refused split", (long long)total);
  return 0;
}

static void test_split_bad_color(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_split_bad_color, NULL,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

/* ---- gang_create_subgang -------------------------------------------------- */

typedef struct list_case {
  int n;
  int ranks[8];
} list_case_t;

static int rank_subgang(gang_t* g, int rank, int size, void* arg) {
  const list_case_t* lc = (const list_case_t*)arg;
  gang_t* sub = (gang_t*)&sub;
  int i, member = 0;
  (void)size;
  for (i = 0; i < lc->n; ++i) {
    if (lc->ranks[i] == rank) member = 1;
  }
  CHECK_OK(gang_create_subgang(g, lc->ranks, lc->n, &sub));
  if (!member) {
    CHECK(sub == NULL, "a non-member got a gang");
  } else if (check_members(g, sub, lc->ranks, lc->n)) {
    return 1;
  }
  CHECK_OK(gang_destroy(sub));
  CHECK_OK(gang_barrier(g, NULL));
  return 0;
}

static const list_case_t kList31 = {2, {3, 1}};
static const list_case_t kListReversed = {4, {3, 2, 1, 0}};
static const list_case_t kListSingle = {1, {2}};
static const list_case_t kList3of3 = {3, {1, 2, 0}};

static void test_subgang_lists(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_subgang, (void*)&kList31,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_subgang, (void*)&kListReversed,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_subgang, (void*)&kListSingle,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_subgang, (void*)&kList3of3,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

/* Bad lists are refused on every rank before traffic. */
static int rank_subgang_bad(gang_t* g, int rank, int size, void* arg) {
  const int dup[2] = {1, 1};
  const int out_of_range[2] = {0, 4};
  const int negative[1] = {-1};
  gang_t* sub = NULL;
  int64_t one = 1, total = 0;
  (void)rank;
  (void)arg;
  CHECK_STATUS(gang_create_subgang(g, dup, 2, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "ranks") != NULL, "message does not name ranks");
  CHECK_STATUS(gang_create_subgang(g, out_of_range, 2, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(gang_create_subgang(g, negative, 1, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(gang_create_subgang(g, dup, 0, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "n ") != NULL || strstr(gang_last_error(), "n:") != NULL,
        "message does not name n");
  CHECK_STATUS(gang_create_subgang(g, NULL, 2, &sub), GANG_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(gang_create_subgang(g, dup, 1, NULL), GANG_ERR_INVALID_ARGUMENT);
  CHECK(sub == NULL, "*out set on failure");
  CHECK_OK(gang_all_reduce(g, &one, &total, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(total == size, "sum %lld after refused sub-gangs", (long long)total);
  return 0;
}

static void test_subgang_bad_lists(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_subgang_bad, NULL,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

/* ---- lifetimes and nesting --------------------------------------------------- */

/* Splits of splits: {0,1},{2,3} by rank/2, then each pair reversed. Root
 * ranks map through both levels. */
static int rank_split_of_split(gang_t* g, int rank, int size, void* arg) {
  gang_t* a = NULL;
  gang_t* b = NULL;
  int members_a[2], members_b[2];
  (void)arg;
  (void)size;
  CHECK_OK(gang_split(g, rank / 2, 0, &a));
  members_a[0] = (rank / 2) * 2;
  members_a[1] = members_a[0] + 1;
  if (check_members(g, a, members_a, 2)) return 1;
  CHECK_OK(gang_split(a, 0, -gang_rank(a), &b));
  /* b's members as ranks of a: reversed. */
  members_b[0] = 1;
  members_b[1] = 0;
  if (check_members(a, b, members_b, 2)) return 1;
  /* And as root ranks. */
  CHECK(gang_root_rank(b, 0) == members_a[1] && gang_root_rank(b, 1) == members_a[0],
        "root ranks of the split of a split are %d,%d", gang_root_rank(b, 0),
        gang_root_rank(b, 1));
  CHECK(strncmp(gang_name(b), gang_name(a), strlen(gang_name(a))) == 0,
        "\"%s\" is not under \"%s\"", gang_name(b), gang_name(a));
  /* Interleave operations on all three. */
  {
    int64_t x = rank + 1, ra = 0, rb = 0, rg = 0;
    const int64_t pair = 2 * members_a[0] + 3;
    CHECK_OK(gang_all_reduce(g, &x, &rg, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK_OK(gang_all_reduce(b, &x, &rb, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK_OK(gang_all_reduce(a, &x, &ra, 1, GANG_INT64, GANG_MAX, NULL));
    CHECK(rg == 10 && rb == pair && ra == members_a[1] + 1,
          "interleaved results %lld %lld %lld", (long long)rg, (long long)rb, (long long)ra);
  }
  /* Destroy the middle gang first: its child keeps working. */
  CHECK_OK(gang_destroy(a));
  {
    int64_t x = 1, r = 0;
    CHECK_OK(gang_all_reduce(b, &x, &r, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(r == 2, "child sum after its parent's destruction: %lld", (long long)r);
  }
  CHECK_OK(gang_destroy(b));
  CHECK_OK(gang_barrier(g, NULL));
  return 0;
}

static void test_split_of_split(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_split_of_split, NULL,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

/* Destroys a root gang before the gang split from it, and the other way
 * round, with the process's own root gang (not the harness's). */
static int proc_destroy_orders(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_options_t o;
  int round;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, GANG_TIMEOUT_MS, &store));
  for (round = 0; round < 2; ++round) {
    gang_t* root = NULL;
    gang_t* child = NULL;
    int64_t x = rank + 1, r = 0;
    gang_options_init(&o);
    o.backend = "gloo";
    o.rank = rank;
    o.size = size;
    o.store = store;
    o.timeout_ms = GANG_TIMEOUT_MS;
    o.name = round == 0 ? "parent_first" : "child_first";
    CHECK_OK(gang_create(&o, &root));
    CHECK_OK(gang_split(root, rank % 2, rank, &child));
    if (round == 0) {
      CHECK_OK(gang_destroy(root));
      CHECK_OK(gang_all_reduce(child, &x, &r, 1, GANG_INT64, GANG_SUM, NULL));
      CHECK(r == (rank % 2 == 0 ? 1 + 3 : 2 + 4), "child sum %lld", (long long)r);
      CHECK_OK(gang_destroy(child));
    } else {
      CHECK_OK(gang_destroy(child));
      CHECK_OK(gang_all_reduce(root, &x, &r, 1, GANG_INT64, GANG_SUM, NULL));
      CHECK(r == 10, "root sum %lld", (long long)r);
      CHECK_OK(gang_destroy(root));
    }
  }
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static void test_destroy_either_order(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(4, proc_destroy_orders, NULL, WALL_S), 0);
}

/* Many splits in a row give distinct names and independent gangs. */
static int rank_repeated_splits(gang_t* g, int rank, int size, void* arg) {
  gang_t* subs[5];
  char names[5][128];
  int i, j;
  (void)arg;
  for (i = 0; i < 5; ++i) {
    CHECK_OK(gang_split(g, (rank + i) % 2, 0, &subs[i]));
    snprintf(names[i], sizeof names[i], "%s", gang_name(subs[i]));
    for (j = 0; j < i; ++j) {
      CHECK(strcmp(names[i], names[j]) != 0, "splits %d and %d share the name %s", j, i,
            names[i]);
    }
  }
  for (i = 4; i >= 0; --i) {
    int64_t x = rank, r = 0, want = 0;
    int k;
    for (k = 0; k < size; ++k) {
      if ((k + i) % 2 == (rank + i) % 2) want += k;
    }
    CHECK_OK(gang_all_reduce(subs[i], &x, &r, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(r == want, "split %d sum %lld, expected %lld", i, (long long)r, (long long)want);
  }
  for (i = 0; i < 5; ++i) CHECK_OK(gang_destroy(subs[i]));
  return 0;
}

static void test_repeated_splits(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_repeated_splits, NULL,
                                       GANG_TIMEOUT_MS, WALL_S), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_parity_reverse_n4),
      cmocka_unit_test(test_split_parity_reverse_n3),
      cmocka_unit_test(test_split_ties_by_parent_rank),
      cmocka_unit_test(test_split_color_none),
      cmocka_unit_test(test_split_large_colors),
      cmocka_unit_test(test_split_bad_color),
      cmocka_unit_test(test_subgang_lists),
      cmocka_unit_test(test_subgang_bad_lists),
      cmocka_unit_test(test_split_of_split),
      cmocka_unit_test(test_destroy_either_order),
      cmocka_unit_test(test_repeated_splits),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

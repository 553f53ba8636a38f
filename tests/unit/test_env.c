/*
 * test_env.c - the launch environment (gang.h "Environment and launch"):
 * gang_env_detect's sources, precedence and checks, SLURM host lists and
 * ports, the gang_env_t size rules, and gang_create driven by the
 * environment alone (rank 0 hosting the store, or joining one a launcher
 * already serves; torch's env://; the warning of a process that finds no
 * launcher).
 *
 * Every test starts from an environment cleared of the variables gang reads,
 * and sets what it needs with setenv.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

/* Every variable gang_env_detect or gang_create may read. */
static const char* const kAllVars[] = {
    "GANG_RANK", "GANG_SIZE", "GANG_LOCAL_RANK", "GANG_LOCAL_SIZE",
    "GANG_NODE_RANK", "GANG_NUM_NODES", "GANG_INIT_METHOD", "GANG_TIMEOUT_MS",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK",
    "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid",
    "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PALS_APID", "PMI_PORT",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURM_NNODES", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
    "SLURM_JOB_ID", "SLURM_STEP_TASKS_PER_NODE", "GANG_LOG_LEVEL"};

static void clear_env(void) {
  size_t i;
  for (i = 0; i < sizeof kAllVars / sizeof kAllVars[0]; ++i) {
    unsetenv(kAllVars[i]);
  }
}

static int setup(void** state) {
  (void)state;
  clear_env();
  return 0;
}

/* Sets "NAME=value" pairs from a NULL-terminated list. */
static void set_vars(const char* const* pairs) {
  for (; *pairs != NULL; ++pairs) {
    char name[128];
    const char* eq = strchr(*pairs, '=');
    assert_non_null(eq);
    assert_true((size_t)(eq - *pairs) < sizeof name);
    memcpy(name, *pairs, (size_t)(eq - *pairs));
    name[eq - *pairs] = '\0';
    assert_int_equal(setenv(name, eq + 1, 1), 0);
  }
}

static gang_env_t detect_ok(void) {
  gang_env_t e;
  gang_status_t s;
  gang_env_init(&e);
  s = gang_env_detect(&e);
  if (s != GANG_OK)
    fail_msg("gang_env_detect: %s: %s", gang_status_name(s), gang_last_error());
  return e;
}

/* gang_env_detect fails with INVALID_ARGUMENT and a message holding every
 * NULL-terminated substring. */
static void detect_fails(const char* first, ...) {
  gang_env_t e;
  gang_status_t s;
  va_list ap;
  const char* want;
  gang_env_init(&e);
  e.rank = 1234; /* must survive a failed call */
  s = gang_env_detect(&e);
  if (s != GANG_ERR_INVALID_ARGUMENT) {
    fail_msg(
        "gang_env_detect returned %s (%s), expected GANG_ERR_INVALID_ARGUMENT",
        gang_status_name(s), gang_last_error());
  }
  assert_int_equal(e.rank, 1234);
  va_start(ap, first);
  for (want = first; want != NULL; want = va_arg(ap, const char*)) {
    if (strstr(gang_last_error(), want) == NULL) {
      va_end(ap);
      fail_msg("message \"%s\" does not mention \"%s\"", gang_last_error(),
               want);
    }
  }
  va_end(ap);
}

static void expect_env(const gang_env_t* e, const char* source, int rank,
                       int size, int local_rank, int local_size, int node_rank,
                       int num_nodes, const char* addr, int port) {
  assert_string_equal(e->source, source);
  assert_int_equal(e->rank, rank);
  assert_int_equal(e->size, size);
  assert_int_equal(e->local_rank, local_rank);
  assert_int_equal(e->local_size, local_size);
  assert_int_equal(e->node_rank, node_rank);
  assert_int_equal(e->num_nodes, num_nodes);
  assert_string_equal(e->master_addr, addr);
  assert_int_equal(e->master_port, port);
  assert_int_equal(e->reserved0, 0);
}

/* The documented Open MPI / PMI port: 20000 + FNV-1a(text) % 40000. */
static int fnv_port(const char* text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *text; ++text) {
    h ^= (unsigned char)*text;
    h *= 0x100000001b3ull;
  }
  return 20000 + (int)(h % 40000);
}

/* ---- sources ---------------------------------------------------------- */

static void test_none(void** state) {
  gang_env_t e;
  (void)state;
  e = detect_ok();
  expect_env(&e, "none", 0, 1, -1, -1, -1, -1, "", -1);
}

static void test_source_tables(void** state) {
  static const char* const gang_vars[] = {
      "GANG_RANK=2",
      "GANG_SIZE=8",
      "GANG_LOCAL_RANK=0",
      "GANG_LOCAL_SIZE=4",
      "GANG_NODE_RANK=1",
      "GANG_NUM_NODES=2",
      "GANG_INIT_METHOD=tcp://10.1.2.3:4567",
      NULL};
  static const char* const torch_vars[] = {"RANK=3",
                                           "WORLD_SIZE=4",
                                           "LOCAL_RANK=1",
                                           "LOCAL_WORLD_SIZE=2",
                                           "GROUP_RANK=1",
                                           "GROUP_WORLD_SIZE=2",
                                           "MASTER_ADDR=host-a",
                                           "MASTER_PORT=29500",
                                           NULL};
  static const char* const ompi_vars[] = {"OMPI_COMM_WORLD_RANK=5",
                                          "OMPI_COMM_WORLD_SIZE=8",
                                          "OMPI_COMM_WORLD_LOCAL_RANK=1",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                                          "OMPI_COMM_WORLD_NODE_RANK=1",
                                          "MASTER_ADDR=mpi-head",
                                          "MASTER_PORT=1234",
                                          NULL};
  static const char* const pmi_vars[] = {"PMI_RANK=1",
                                         "PMI_SIZE=6",
                                         "MPI_LOCALRANKID=1",
                                         "MPI_LOCALNRANKS=3",
                                         "MASTER_ADDR=10.0.0.9",
                                         "MASTER_PORT=4000",
                                         NULL};
  static const char* const pals_vars[] = {
      "PMI_RANK=4",           "PMI_SIZE=6",
      "PMI_LOCAL_RANK=2",     "PMI_LOCAL_SIZE=3",
      "MPI_LOCALRANKID=junk", "MASTER_ADDR=x",
      "MASTER_PORT=4001",     NULL};
  static const char* const slurm_vars[] = {"SLURM_PROCID=5",
                                           "SLURM_NTASKS=8",
                                           "SLURM_LOCALID=1",
                                           "SLURM_NODEID=2",
                                           "SLURM_NNODES=4",
                                           "SLURM_STEP_NODELIST=node[01-04,07]",
                                           "SLURM_JOB_NODELIST=other[1-9]",
                                           "SLURM_JOB_ID=123456",
                                           "SLURM_STEP_TASKS_PER_NODE=2(x4)",
                                           NULL};
  gang_env_t e;
  (void)state;

  set_vars(gang_vars);
  e = detect_ok();
  expect_env(&e, "gang", 2, 8, 0, 4, 1, 2, "10.1.2.3", 4567);

  clear_env();
  set_vars(torch_vars);
  e = detect_ok();
  expect_env(&e, "torchrun", 3, 4, 1, 2, 1, 2, "host-a", 29500);

  clear_env();
  set_vars(ompi_vars);
  e = detect_ok();
  expect_env(&e, "openmpi", 5, 8, 1, 4, 1, -1, "mpi-head", 1234);

  clear_env();
  set_vars(pmi_vars);
  e = detect_ok();
  expect_env(&e, "pmi", 1, 6, 1, 3, -1, -1, "10.0.0.9", 4000);

  /* Cray PALS's pair wins over Hydra's, which is then not read. */
  clear_env();
  set_vars(pals_vars);
  e = detect_ok();
  expect_env(&e, "pmi", 4, 6, 2, 3, -1, -1, "x", 4001);

  clear_env();
  set_vars(slurm_vars);
  e = detect_ok();
  expect_env(&e, "slurm", 5, 8, 1, 2, 2, 4, "node01", 20000 + 123456 % 40000);
}

static void test_slurm_master(void** state) {
  static const char* const base[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", NULL};
  gang_env_t e;
  (void)state;
  set_vars(base);
  /* No host list, no job id: nothing known. */
  e = detect_ok();
  expect_env(&e, "slurm", 0, 2, -1, -1, -1, -1, "", -1);

  setenv("SLURM_JOB_NODELIST", "gpu[08-11]", 1);
  setenv("SLURM_JOB_ID", "7", 1);
  e = detect_ok();
  assert_string_equal(e.master_addr, "gpu08");
  assert_int_equal(e.master_port, 20007);

  /* The step's list wins over the job's; MASTER_PORT over the job id. */
  setenv("SLURM_STEP_NODELIST", "a[1-2]-ib,b3", 1);
  setenv("MASTER_PORT", "31337", 1);
  e = detect_ok();
  assert_string_equal(e.master_addr, "a1-ib");
  assert_int_equal(e.master_port, 31337);

  /* MASTER_ADDR, where set, names the master under SLURM too. */
  setenv("MASTER_ADDR", "10.9.8.7", 1);
  e = detect_ok();
  assert_string_equal(e.master_addr, "10.9.8.7");
}

static void test_slurm_hostlists(void** state) {
  static const struct {
    const char* list;
    const char* first;
  } good[] = {
      {"node[01-04,07]", "node01"},
      {"a[1-2]-ib,b3", "a1-ib"},
      {"gpu[08-11]", "gpu08"},
      {"r[2-3]n[05-06]", "r2n05"},
      {"login1,node[3-4]", "login1"},
      {"n[7,1-2]", "n7"},
      {"h[000-002]", "h000"},
      {"h[9-10]", "h9"},
      {"[08-11]x", "08x"},
      {"plain", "plain"},
      {"rack[1-2]-node[001-128],spare[1],login", "rack1-node001"},
      {"c[1-2]-[3-4]", "c1-3"},
  };
  static const char* const bad[] = {
      "node[01-", "node01]", "n[a-b]",    "n[5-3]", "a,,b", "n[]",
      "n[1-2",    "n[1,]",   "ok,bad[1-", "a b",    ",a",   "n[1-2-3]",
  };
  size_t i;
  (void)state;
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "1", 1);
  for (i = 0; i < sizeof good / sizeof good[0]; ++i) {
    gang_env_t e;
    setenv("SLURM_STEP_NODELIST", good[i].list, 1);
    e = detect_ok();
    if (strcmp(e.master_addr, good[i].first) != 0) {
      fail_msg("host list \"%s\": first host \"%s\", expected \"%s\"",
               good[i].list, e.master_addr, good[i].first);
    }
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    setenv("SLURM_STEP_NODELIST", bad[i], 1);
    detect_fails("SLURM_STEP_NODELIST", bad[i], NULL);
  }
  /* A number too long says so, and what is accepted. */
  setenv("SLURM_STEP_NODELIST", "n[0-4000000000]", 1);
  detect_fails("SLURM_STEP_NODELIST", "n[0-4000000000]", "more than 9 digits", "accepted",
               NULL);
  setenv("SLURM_STEP_NODELIST", "n[a-b]", 1);
  detect_fails("neither a number N nor a range N-M", "accepted", NULL);
}

static void test_slurm_port_function(void** state) {
  static const struct {
    const char* job;
    int port;
  } cases[] = {
      {"0", 20000},
      {"1", 20001},
      {"39999", 59999},
      {"40000", 20000},
      {"123456", 23456},
      {"4294967295", 27295},
      {"18446744073709551615", 20000 + (int)(18446744073709551615ull % 40000)},
  };
  size_t i;
  (void)state;
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_JOB_NODELIST", "n1", 1);
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    gang_env_t e;
    setenv("SLURM_JOB_ID", cases[i].job, 1);
    e = detect_ok();
    assert_int_equal(e.master_port, cases[i].port);
    assert_true(e.master_port >= 20000 && e.master_port < 60000);
  }
  setenv("SLURM_JOB_ID", "12a", 1);
  detect_fails("SLURM_JOB_ID", NULL);
}

static void test_mpi_single_node(void** state) {
  gang_env_t e;
  (void)state;
  /* One node (local size = size) and a job id: loopback and a derived port. */
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  setenv("PMIX_NAMESPACE", "prterun-host-4242@1", 1);
  e = detect_ok();
  expect_env(&e, "openmpi", 1, 4, 1, 4, -1, -1, "127.0.0.1",
             fnv_port("prterun-host-4242@1"));

  /* Several nodes: no master without MASTER_ADDR. */
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  e = detect_ok();
  assert_string_equal(e.master_addr, "");
  assert_int_equal(e.master_port, fnv_port("prterun-host-4242@1"));

  clear_env();
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "2", 1);
  setenv("MPI_LOCALRANKID", "0", 1);
  setenv("MPI_LOCALNRANKS", "2", 1);
  e = detect_ok(); /* no job id: address known, port not */
  expect_env(&e, "pmi", 0, 2, 0, 2, -1, -1, "127.0.0.1", -1);
  setenv("PMI_PORT", "head:33001", 1);
  e = detect_ok();
  assert_int_equal(e.master_port, fnv_port("head:33001"));
}

static void test_precedence(void** state) {
  gang_env_t e;
  (void)state;
  /* torchrun inside an sbatch job: SLURM's variables are not even read. */
  setenv("SLURM_PROCID", "oops", 1);
  setenv("SLURM_NTASKS", "-3", 1);
  setenv("SLURM_STEP_NODELIST", "broken[", 1);
  setenv("SLURM_JOB_ID", "x", 1);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29400", 1);
  e = detect_ok();
  expect_env(&e, "torchrun", 1, 2, -1, -1, -1, -1, "127.0.0.1", 29400);

  /* gang's own variables beat torchrun's. */
  setenv("GANG_RANK", "0", 1);
  setenv("GANG_SIZE", "3", 1);
  e = detect_ok();
  assert_string_equal(e.source, "gang");
  assert_int_equal(e.size, 3);
  assert_string_equal(e.master_addr, "");

  /* Open MPI beats PMI and SLURM; PMI beats SLURM. */
  clear_env();
  setenv("SLURM_PROCID", "bad", 1);
  setenv("SLURM_NTASKS", "9", 1);
  setenv("PMI_RANK", "2", 1);
  setenv("PMI_SIZE", "3", 1);
  e = detect_ok();
  assert_string_equal(e.source, "pmi");
  assert_int_equal(e.rank, 2);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "5", 1);
  e = detect_ok();
  assert_string_equal(e.source, "openmpi");
  assert_int_equal(e.size, 5);

  /* A half-set source before the winner is passed over. */
  clear_env();
  setenv("RANK", "3", 1);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  e = detect_ok();
  assert_string_equal(e.source, "slurm");
  assert_int_equal(e.rank, 1);
}

static void test_broken_sets(void** state) {
  (void)state;
  /* Half-set rank/size pairs, when no source wins. */
  setenv("RANK", "0", 1);
  detect_fails("RANK is set but WORLD_SIZE is not", NULL);
  clear_env();
  setenv("SLURM_NTASKS", "4", 1);
  detect_fails("SLURM_NTASKS is set but SLURM_PROCID is not", NULL);
  clear_env();
  setenv("GANG_SIZE", "4", 1);
  detect_fails("GANG_RANK", NULL);

  /* Half-set local and node pairs within the winner. */
  clear_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "0", 1);
  detect_fails("LOCAL_RANK is set but LOCAL_WORLD_SIZE is not", NULL);
  unsetenv("LOCAL_RANK");
  setenv("GROUP_WORLD_SIZE", "2", 1);
  detect_fails("GROUP_WORLD_SIZE is set but GROUP_RANK is not", NULL);

  /* Non-numeric and negative values. */
  clear_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "four", 1);
  detect_fails("WORLD_SIZE", "four", "torchrun", NULL);
  setenv("WORLD_SIZE", "4", 1);
  setenv("RANK", "-1", 1);
  detect_fails("RANK", "negative", NULL);
  setenv("RANK", "1.5", 1);
  detect_fails("RANK", "1.5", NULL);
  setenv("RANK", " 1", 1);
  detect_fails("RANK", NULL);
  setenv("RANK", "99999999999", 1);
  detect_fails("RANK", "too large", NULL);

  /* rank >= size, size 0. */
  setenv("RANK", "4", 1);
  detect_fails("RANK=4", "WORLD_SIZE=4", NULL);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "0", 1);
  detect_fails("WORLD_SIZE=0", NULL);

  /* local_rank >= local_size, in several sources. */
  clear_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "2", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  detect_fails("LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", NULL);
  clear_env();
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  detect_fails("OMPI_COMM_WORLD_LOCAL_RANK=5", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
               NULL);
  clear_env();
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_LOCALID", "3", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_NNODES", "2", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "3,1", 1);
  detect_fails("SLURM_LOCALID=3", "SLURM_STEP_TASKS_PER_NODE", NULL);
  clear_env();
  setenv("GANG_RANK", "0", 1);
  setenv("GANG_SIZE", "4", 1);
  setenv("GANG_NODE_RANK", "2", 1);
  setenv("GANG_NUM_NODES", "2", 1);
  detect_fails("GANG_NODE_RANK=2", "GANG_NUM_NODES=2", NULL);

  /* MASTER_PORT must be a port. */
  clear_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_PORT", "70000", 1);
  detect_fails("MASTER_PORT", NULL);
  setenv("MASTER_PORT", "http", 1);
  detect_fails("MASTER_PORT", "http", NULL);
}

static void test_env_struct_size(void** state) {
  struct {
    gang_env_t env;
    uint64_t future;
  } big;
  gang_env_t e;
  (void)state;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);

  assert_int_equal(gang_env_detect(NULL), GANG_ERR_INVALID_ARGUMENT);

  /* init with a size below the first version does nothing. */
  memset(&e, 0x5a, sizeof e);
  gang_env_init_v(&e, 8);
  assert_int_equal(e.rank, 0x5a5a5a5a);
  gang_env_init_v(NULL, sizeof e);

  gang_env_init(&e);
  assert_int_equal(e.struct_size, sizeof e);
  assert_int_equal(e.rank, -1);
  assert_int_equal(e.master_port, -1);
  e.struct_size = 16;
  assert_int_equal(gang_env_detect(&e), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "struct_size"));

  /* A caller built against a larger struct: the tail is checked, kept. */
  gang_env_init_v(&big.env, sizeof big);
  assert_int_equal(big.env.struct_size, sizeof big);
  assert_int_equal(gang_env_detect(&big.env), GANG_OK);
  assert_int_equal(big.env.rank, 1);
  assert_int_equal(big.env.struct_size, sizeof big);
  assert_true(big.future == 0);
  big.future = 1;
  assert_int_equal(gang_env_detect(&big.env), GANG_ERR_UNSUPPORTED);

  /* A master address that gang_env_t cannot hold is an error, not cut. */
  {
    char addr[300];
    memset(addr, 'h', sizeof addr - 1);
    addr[sizeof addr - 1] = '\0';
    setenv("MASTER_ADDR", addr, 1);
    detect_fails("MASTER_ADDR", "255", NULL);
  }
}

/* ---- gang_create from the environment --------------------------------- */

/* A port nobody listens on: bound (so nobody else takes it) but not
 * listening, so connections are refused. Returns the socket. */
static int closed_port(int* port) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr*)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr*)&a, &len), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* A free port, released again: good enough for a test that binds it next. */
static int free_port(void) {
  int port = 0;
  close(closed_port(&port));
  return port;
}

static void expect_create_fails(gang_status_t want, const char* first, ...) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t s;
  va_list ap;
  const char* sub;
  gang_options_init(&o);
  s = gang_create(&o, &g);
  if (s != want) {
    fail_msg("gang_create returned %s (%s), expected %s", gang_status_name(s),
             gang_last_error(), gang_status_name(want));
  }
  assert_null(g);
  va_start(ap, first);
  for (sub = first; sub != NULL; sub = va_arg(ap, const char*)) {
    if (strstr(gang_last_error(), sub) == NULL) {
      va_end(ap);
      fail_msg("message \"%s\" does not mention \"%s\"", gang_last_error(),
               sub);
    }
  }
  va_end(ap);
}

static void test_create_alone(void** state) {
  gang_options_t o;
  gang_t* g = NULL;
  (void)state;
  gang_options_init(&o);
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  assert_int_equal(gang_rank(g), 0);
  assert_int_equal(gang_size(g), 1);
  assert_int_equal(gang_destroy(g), GANG_OK);

  /* A broken environment fails gang_create the same way. */
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "2", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "RANK=2", "WORLD_SIZE=2",
                      NULL);
}

static void test_create_needs_rendezvous(void** state) {
  (void)state;
  setenv("GANG_RANK", "1", 1);
  setenv("GANG_SIZE", "2", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "GANG_INIT_METHOD", NULL);

  /* Open MPI across nodes without MASTER_ADDR: asked for by name. */
  clear_env();
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  setenv("PMIX_NAMESPACE", "job-1", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "MASTER_ADDR", "MASTER_PORT",
                      "openmpi", NULL);
}

/* Each rank: all-reduce rank+1 over a gang made from the environment. */
static int all_reduce_rank(const char* expect_source, int size) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_env_t e;
  int32_t v;
  gang_env_init(&e);
  CHECK_OK(gang_env_detect(&e));
  CHECK(strcmp(e.source, expect_source) == 0, "source %s", e.source);
  gang_options_init(&o);
  CHECK_OK(gang_create(&o, &g));
  CHECK(gang_rank(g) == e.rank, "rank %d vs %d", gang_rank(g), e.rank);
  CHECK(gang_size(g) == size, "size %d", gang_size(g));
  v = gang_rank(g) + 1;
  CHECK_OK(gang_all_reduce(g, &v, &v, 1, GANG_INT32, GANG_SUM, NULL));
  CHECK(v == size * (size + 1) / 2, "sum %d", (int)v);
  CHECK_OK(gang_destroy(g));
  return 0;
}

struct create_arg {
  char init_method[128];
  int check_joined; /* rank 0 reads gang/root/joined from the harness store */
};

static int rank_gang_vars(int rank, int size, const char* store_url,
                          void* arg) {
  const struct create_arg* a = (const struct create_arg*)arg;
  char buf[16];
  clear_env();
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("GANG_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("GANG_SIZE", buf, 1);
  setenv("GANG_INIT_METHOD", a->init_method, 1);
  setenv("GANG_TIMEOUT_MS", "30000", 1);
  if (all_reduce_rank("gang", size) != 0) return 1;
  if (a->check_joined && rank == 0) {
    /* The gang rendezvoused through the harness's store: its counter
     * counted every rank. */
    gang_store_t* s = NULL;
    void* v = NULL;
    size_t n = 0;
    CHECK_OK(gang_store_create(store_url, 0, 10000, &s));
    CHECK_OK(gang_store_get(s, "gang/root/joined", &v, &n));
    CHECK(n == 1 && memcmp(v, "3", 1) == 0, "joined = %.*s", (int)n,
          (const char*)v);
    gang_free(v);
    CHECK_OK(gang_store_destroy(s));
  }
  return 0;
}

static void test_create_three_ranks_rank0_hosts(void** state) {
  struct create_arg a;
  (void)state;
  memset(&a, 0, sizeof a);
  snprintf(a.init_method, sizeof a.init_method, "tcp://127.0.0.1:%d",
           free_port());
  assert_int_equal(gang_test_run_procs(3, rank_gang_vars, &a, 60), 0);
}

static void test_create_three_ranks_join_served_port(void** state) {
  struct create_arg a;
  gang_store_t* server = NULL;
  (void)state;
  /* A launcher's store already serves the port: rank 0 must join it. */
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 30000, &server),
                   GANG_OK);
  memset(&a, 0, sizeof a);
  snprintf(a.init_method, sizeof a.init_method, "tcp://127.0.0.1:%d",
           gang_store_port(server));
  a.check_joined = 1;
  {
    gang_test_opts_t o;
    gang_test_opts_init(&o);
    o.size = 3;
    o.plain_fn = rank_gang_vars;
    o.arg = &a;
    o.store_url = a.init_method;
    o.wall_timeout_s = 60;
    assert_int_equal(gang_test_run(&o), 0);
  }
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

static int rank_openmpi_one_node(int rank, int size, const char* store_url,
                                 void* arg) {
  char buf[16];
  (void)store_url;
  clear_env();
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("OMPI_COMM_WORLD_RANK", buf, 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("OMPI_COMM_WORLD_SIZE", buf, 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", buf, 1);
  setenv("PMIX_NAMESPACE", (const char*)arg, 1);
  setenv("GANG_TIMEOUT_MS", "30000", 1);
  return all_reduce_rank("openmpi", size);
}

static void test_create_openmpi_one_node(void** state) {
  char ns[64];
  int i;
  (void)state;
  /* A namespace whose derived port is free right now. */
  for (i = 0;; ++i) {
    int fd;
    struct sockaddr_in a;
    assert_true(i < 100);
    snprintf(ns, sizeof ns, "prterun-test-%d-%d@1", (int)getpid(), i);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)fnv_port(ns));
    if (bind(fd, (struct sockaddr*)&a, sizeof a) == 0) {
      close(fd);
      break;
    }
    close(fd);
  }
  assert_int_equal(gang_test_run_procs(2, rank_openmpi_one_node, ns, 60), 0);
}

static void test_create_port_served_by_something_else(void** state) {
  /* Something that is not a gang store holds the port (listening, never
   * answering): rank 0 joins, its PING gets no answer, and the error names
   * the address and where it came from. */
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  char url[64];
  int64_t t0;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  (void)state;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  assert_int_equal(bind(fd, (struct sockaddr*)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 16), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr*)&a, &len), 0);
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
  setenv("GANG_RANK", "0", 1);
  setenv("GANG_SIZE", "2", 1);
  setenv("GANG_INIT_METHOD", url, 1);
  setenv("GANG_TIMEOUT_MS", "1000", 1);
  t0 = gang_test_now_ms();
  expect_create_fails(GANG_ERR_STORE, url, "GANG_INIT_METHOD", NULL);
  assert_true(gang_test_now_ms() - t0 < 10000);
  close(fd);
}

static void test_create_wrong_master(void** state) {
  char where[64];
  int port = 0;
  int64_t t0, took;
  const int fd = closed_port(&port);
  (void)state;
  snprintf(where, sizeof where, "127.0.0.1:%d", port);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    setenv("MASTER_PORT", p, 1);
  }
  setenv("GANG_TIMEOUT_MS", "1500", 1);

  /* Under torchrun's agent store: a torch:// client. */
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  t0 = gang_test_now_ms();
  expect_create_fails(GANG_ERR_STORE, where, "torch://", "MASTER_ADDR",
                      "MASTER_PORT", NULL);
  took = gang_test_now_ms() - t0;
  assert_true(took >= 1000 && took < 10000);

  /* Without it: a gang tcp:// client (rank 1 never serves). */
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  t0 = gang_test_now_ms();
  expect_create_fails(GANG_ERR_STORE, where, "tcp://", "MASTER_ADDR", NULL);
  took = gang_test_now_ms() - t0;
  assert_true(took >= 1000 && took < 10000);
  close(fd);
}

static void test_agent_store_that_is_not_torch(void** state) {
  /* MASTER_PORT serves a gang store, not PyTorch's TCPStore: the torch
   * client's first CHECK is rejected, and says what it expected. */
  gang_store_t* server = NULL;
  char p[16];
  (void)state;
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 10000, &server),
                   GANG_OK);
  snprintf(p, sizeof p, "%d", gang_store_port(server));
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", p, 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("GANG_TIMEOUT_MS", "2000", 1);
  expect_create_fails(GANG_ERR_STORE, "PyTorch", "MASTER_ADDR", p, NULL);
  assert_int_equal(gang_store_destroy(server), GANG_OK);

  /* And gang_store_create refuses to serve torch://. */
  {
    gang_store_t* s = NULL;
    assert_int_equal(gang_store_create("torch://127.0.0.1:0", 1, 1000, &s),
                     GANG_ERR_INVALID_ARGUMENT);
    assert_null(s);
  }
}

/* ---- torch's env:// ----------------------------------------------------- */

static int rank_env_url(int rank, int size, const char* store_url, void* arg) {
  char buf[16];
  gang_env_t e;
  (void)store_url;
  clear_env();
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("GANG_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("GANG_SIZE", buf, 1);
  setenv("GANG_INIT_METHOD", "env://", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", (const char*)arg, 1);
  setenv("GANG_TIMEOUT_MS", "30000", 1);
  /* The master env:// names is what gang_env_detect reports. */
  gang_env_init(&e);
  CHECK_OK(gang_env_detect(&e));
  CHECK(strcmp(e.master_addr, "127.0.0.1") == 0, "master %s", e.master_addr);
  CHECK(e.master_port == atoi((const char*)arg), "port %d", e.master_port);
  return all_reduce_rank("gang", size);
}

/* GANG_INIT_METHOD=env:// rendezvouses at MASTER_ADDR:MASTER_PORT, rank 0
 * serving it, as torch's env:// does. */
static void test_create_env_url(void** state) {
  char port[16];
  (void)state;
  snprintf(port, sizeof port, "%d", free_port());
  assert_int_equal(gang_test_run_procs(3, rank_env_url, port, 60), 0);
}

static void test_env_url_refused(void** state) {
  gang_store_t* st = NULL;
  (void)state;
  /* No rank and size to go with it: torch refuses that too. */
  setenv("GANG_INIT_METHOD", "env://", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "GANG_INIT_METHOD=env://",
                      "RANK and WORLD_SIZE", NULL);
  /* No master. */
  setenv("GANG_RANK", "1", 1);
  setenv("GANG_SIZE", "2", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "GANG_INIT_METHOD=env://",
                      "MASTER_ADDR is not set", NULL);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "MASTER_PORT is not set",
                      NULL);
  setenv("MASTER_PORT", "70000", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "MASTER_PORT=70000", NULL);
  /* torch's query parameters are not read, so they are refused. */
  setenv("GANG_INIT_METHOD", "env://?rank=1", 1);
  expect_create_fails(GANG_ERR_INVALID_ARGUMENT, "env://?rank=1",
                      "\"env://\" alone", NULL);
  /* A store needs an address. */
  assert_int_equal(gang_store_create("env://", 0, 1000, &st),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_null(st);
  assert_non_null(strstr(gang_last_error(), "MASTER_ADDR"));
}

/* ---- a process that finds no launcher ------------------------------------ */

enum alone_case { ALONE_DEFAULT, ALONE_EXPLICIT, ALONE_GANG_1, ALONE_TORCH_1 };

/* The child of warnings_of, a fresh process (the warning is once per
 * process, and this one has made gangs already): `times` gang_creates. */
static int alone_main(enum alone_case c, int times) {
  int i;
  clear_env();
  if (c == ALONE_GANG_1) {
    setenv("GANG_RANK", "0", 1);
    setenv("GANG_SIZE", "1", 1);
  } else if (c == ALONE_TORCH_1) {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
  }
  for (i = 0; i < times; ++i) {
    gang_options_t o;
    gang_t* g = NULL;
    gang_options_init(&o);
    if (c == ALONE_EXPLICIT) {
      o.rank = 0;
      o.size = 1;
    }
    if (gang_create(&o, &g) != GANG_OK || gang_size(g) != 1) return 2;
    gang_destroy(g);
  }
  return 0;
}

/* Runs alone_main(c, times) in a new process whose stderr goes to a file,
 * with the default log level; returns how many lines of that stderr say the
 * process found no launcher, or -1 if the child failed. */
static int warnings_of(enum alone_case c, int times) {
  char path[] = "/tmp/gang-test-env-XXXXXX";
  const int fd = mkstemp(path);
  int status = 0, lines = 0;
  char line[2048];
  FILE* f;
  pid_t pid;
  assert_true(fd >= 0);
  fflush(NULL);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", (int)c);
    snprintf(b, sizeof b, "%d", times);
    dup2(fd, 2);
    execl("/proc/self/exe", "test_env", "--alone", a, b, (char*)NULL);
    _exit(3);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  f = fdopen(fd, "r");
  assert_non_null(f);
  rewind(f);
  while (fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "warn") == NULL) continue;
    if (strstr(line, "no launcher variables found") == NULL) continue;
    assert_non_null(strstr(line, "gang of 1 rank"));
    assert_non_null(strstr(line, "gangrun --nproc-per-node N"));
    assert_non_null(strstr(line, "torchrun"));
    assert_non_null(strstr(line, "GANG_RANK, GANG_SIZE and GANG_INIT_METHOD"));
    ++lines;
  }
  fclose(f);
  unlink(path);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? lines : -1;
}

/* A gang that is 1 rank only because no launcher variable was found says
 * so, at warning level (shown by default), once per process; a size the
 * caller or the environment gives says nothing. */
static void test_alone_warns_once(void** state) {
  (void)state;
  assert_int_equal(warnings_of(ALONE_DEFAULT, 1), 1);
  assert_int_equal(warnings_of(ALONE_DEFAULT, 3), 1);
  assert_int_equal(warnings_of(ALONE_EXPLICIT, 2), 0);
  assert_int_equal(warnings_of(ALONE_GANG_1, 2), 0);
  assert_int_equal(warnings_of(ALONE_TORCH_1, 2), 0);
}

/* GANG_DEBUG takes "detail", "off" or nothing; a typo is an error naming
 * the variable and the value, not silence. */
static void test_debug_variable(void** state) {
  gang_options_t o;
  gang_t* g = NULL;
  float x = 1.0f;
  (void)state;
  gang_options_init(&o);
  o.rank = 0;
  o.size = 1;
  setenv("GANG_DEBUG", "bogus", 1);
  assert_int_equal(gang_create(&o, &g), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "GANG_DEBUG"));
  assert_non_null(strstr(gang_last_error(), "bogus"));
  assert_null(g);
  /* options.debug decides without reading the variable. */
  o.debug = -1;
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  gang_destroy(g);
  g = NULL;
  o.debug = 0;
  setenv("GANG_DEBUG", "off", 1);
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  assert_int_equal(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL),
                   GANG_OK);
  gang_destroy(g);
  g = NULL;
  setenv("GANG_DEBUG", "detail", 1);
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  gang_destroy(g);
  unsetenv("GANG_DEBUG");
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_none, setup),
      cmocka_unit_test_setup(test_source_tables, setup),
      cmocka_unit_test_setup(test_slurm_master, setup),
      cmocka_unit_test_setup(test_slurm_hostlists, setup),
      cmocka_unit_test_setup(test_slurm_port_function, setup),
      cmocka_unit_test_setup(test_mpi_single_node, setup),
      cmocka_unit_test_setup(test_precedence, setup),
      cmocka_unit_test_setup(test_broken_sets, setup),
      cmocka_unit_test_setup(test_env_struct_size, setup),
      cmocka_unit_test_setup(test_create_alone, setup),
      cmocka_unit_test_setup(test_create_needs_rendezvous, setup),
      cmocka_unit_test_setup(test_create_three_ranks_rank0_hosts, setup),
      cmocka_unit_test_setup(test_create_three_ranks_join_served_port, setup),
      cmocka_unit_test_setup(test_create_openmpi_one_node, setup),
      cmocka_unit_test_setup(test_create_port_served_by_something_else, setup),
      cmocka_unit_test_setup(test_create_wrong_master, setup),
      cmocka_unit_test_setup(test_agent_store_that_is_not_torch, setup),
      cmocka_unit_test_setup(test_create_env_url, setup),
      cmocka_unit_test_setup(test_env_url_refused, setup),
      cmocka_unit_test_setup(test_alone_warns_once, setup),
      cmocka_unit_test_setup(test_debug_variable, setup),
  };
  if (argc == 4 && strcmp(argv[1], "--alone") == 0) {
    return alone_main((enum alone_case)atoi(argv[2]), atoi(argv[3]));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}

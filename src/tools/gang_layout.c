/* gang-layout: prints every group of every parallel axis for a gang size and
 * a set of degrees, using only the public gang_layout_ranks. */
#include <gang/gang.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE* f) {
  fprintf(f,
          "usage: gang-layout --size N [--tp N] [--cp N] [--pp N] [--dp N]\n"
          "                   [--ep N] [--sdp N] [--order tp-cp-pp-dp]\n"
          "Prints the ranks of every gang of every axis.\n");
}

static int parse_int(const char* flag, const char* value, int* out) {
  char* end = NULL;
  long v = value ? strtol(value, &end, 10) : 0;
  if (!value || *value == '\0' || *end != '\0' || v < -1 || v > 1 << 24) {
    fprintf(stderr, "gang-layout: %s needs an integer, got \"%s\"\n", flag,
            value ? value : "");
    return -1;
  }
  *out = (int)v;
  return 0;
}

int main(int argc, char** argv) {
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  int size = -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int* target = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--size")) {
      target = &size;
    } else if (!strcmp(a, "--tp")) {
      target = &cfg.tp;
    } else if (!strcmp(a, "--cp")) {
      target = &cfg.cp;
    } else if (!strcmp(a, "--pp")) {
      target = &cfg.pp;
    } else if (!strcmp(a, "--dp")) {
      target = &cfg.dp;
    } else if (!strcmp(a, "--ep")) {
      target = &cfg.ep;
    } else if (!strcmp(a, "--sdp")) {
      target = &cfg.sdp;
    } else if (!strcmp(a, "--order")) {
      if (!v) {
        usage(stderr);
        return 2;
      }
      cfg.order = v;
      ++i;
      continue;
    } else {
      fprintf(stderr, "gang-layout: unknown argument \"%s\"\n", a);
      usage(stderr);
      return 2;
    }
    if (parse_int(a, v, target) != 0) return 2;
    ++i;
  }
  if (size < 1) {
    usage(stderr);
    return 2;
  }

  int* ranks = malloc(sizeof(int) * (size_t)size);
  if (!ranks) return 1;
  size_t n = 0;
  /* Validate once, so a bad configuration prints one clear message. */
  if (gang_layout_ranks(size, &cfg, GANG_AXIS_ROOT, 0, ranks, (size_t)size,
                        &n) != GANG_OK) {
    fprintf(stderr, "gang-layout: %s\n", gang_last_error());
    free(ranks);
    return 1;
  }
  printf("size %d, order %s\n", size, cfg.order ? cfg.order : "tp-cp-pp-dp");
  printf("%-5s %-6s %s\n", "axis", "degree", "gangs");
  const gang_axis_t axes[] = {GANG_AXIS_TP,  GANG_AXIS_CP,  GANG_AXIS_PP,
                              GANG_AXIS_DP,  GANG_AXIS_DPCP, GANG_AXIS_MP,
                              GANG_AXIS_EP,  GANG_AXIS_EDP, GANG_AXIS_SDP,
                              GANG_AXIS_RDP};
  for (size_t a = 0; a < sizeof axes / sizeof axes[0]; ++a) {
    int printed_degree = 0;
    for (int r = 0; r < size; ++r) {
      gang_layout_ranks(size, &cfg, axes[a], r, ranks, (size_t)size, &n);
      if (ranks[0] != r) continue; /* each gang once, at its lowest rank */
      if (!printed_degree) {
        printf("%-5s %-6zu", gang_axis_name(axes[a]), n);
        printed_degree = 1;
      }
      printf(" [");
      for (size_t i = 0; i < n; ++i) printf(i ? ",%d" : "%d", ranks[i]);
      printf("]");
    }
    printf("\n");
  }
  free(ranks);
  return 0;
}

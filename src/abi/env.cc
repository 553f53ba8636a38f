// gang_env_*: the launch environment.
#include <cstring>

#include "abi/shim.h"
#include "core/env.h"

using gang::Status;

namespace {

constexpr size_t kEnvV0Size = 312;
static_assert(sizeof(gang_env_t) == kEnvV0Size,
              "gang_env_t grew: keep kEnvV0Size at the first version");

void defaults(gang_env_t* e) {
  e->rank = -1;
  e->size = -1;
  e->local_rank = -1;
  e->local_size = -1;
  e->node_rank = -1;
  e->num_nodes = -1;
  e->master_port = -1;
  e->reserved0 = 0;
  e->master_addr[0] = '\0';
  e->source[0] = '\0';
}

// Copies text with its NUL into a fixed field; text that does not fit is an
// error naming where it came from, never a silently cut host name.
template <size_t N>
void copy_text(char (&field)[N], const std::string& text, const char* api,
               const char* what) {
  if (text.size() >= N) {
    gang::fail(Status::kInvalidArgument, api, ": ", what, " \"", text,
               "\" is longer than the ", N - 1, " bytes gang_env_t holds");
  }
  std::memcpy(field, text.c_str(), text.size() + 1);
}

}  // namespace

extern "C" {

GANG_API void gang_env_init_v(gang_env_t* env, size_t struct_size) {
  if (env == nullptr || struct_size < kEnvV0Size) return;
  std::memset(env, 0, struct_size);
  defaults(env);
  env->struct_size = struct_size;
}

GANG_API gang_status_t gang_env_detect(gang_env_t* out) {
  GANG_ABI_TRY
  static const char* const api = "gang_env_detect";
  gang::abi::out_arg(out, api, "out");
  // Checks struct_size and that bytes past this library's struct are zero,
  // as for gang_options_t; those bytes are then left as they are.
  gang_env_t e;
  gang::abi::read_sized(&e, sizeof e, out, out->struct_size, kEnvV0Size, api,
                        "env");
  const size_t caller_size = e.struct_size;
  defaults(&e);

  const gang::core::env::Launch l = gang::core::env::detect();
  e.rank = l.rank;
  e.size = l.size;
  e.local_rank = l.local_rank;
  e.local_size = l.local_size;
  e.node_rank = l.node_rank;
  e.num_nodes = l.num_nodes;
  e.master_port = l.master_port;
  const std::string addr_what =
      gang::str_cat("the master address from ", l.master_vars);
  copy_text(e.master_addr, l.master_addr, api, addr_what.c_str());
  copy_text(e.source, l.source, api, "source");
  e.struct_size = caller_size;

  // Written only on success, so a failed call leaves *out as it was.
  std::memcpy(out, &e, caller_size < sizeof e ? caller_size : sizeof e);
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"

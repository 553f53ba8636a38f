// Options, creating and destroying gangs, queries and sub-gangs.
#include <cstring>

#include "abi/shim.h"

using gang::Status;
using gang::abi::out_arg;
using gang::abi::pin_gang;
using gang::abi::wrap_gang;

namespace {

// The size of the first published gang_options_t; callers built against it
// stay supported forever.
constexpr size_t kOptionsV0Size = 72;
static_assert(sizeof(gang_options_t) == kOptionsV0Size,
              "gang_options_t grew: keep kOptionsV0Size at the first version");

void defaults(gang_options_t* o) {
  o->backend = nullptr;
  o->device_type = GANG_DEVICE_CPU;
  o->device_index = -1;
  o->rank = -1;
  o->size = -1;
  o->init_method = nullptr;
  o->store = nullptr;
  o->timeout_ms = 0;
  o->name = nullptr;
  o->debug = 0;
  o->reserved0 = 0;
}

gang_options_t read_options(const gang_options_t* user, const char* api) {
  if (user == nullptr)
    gang::fail(Status::kInvalidArgument, api, ": options is NULL");
  gang_options_t o;
  defaults(&o);
  gang::abi::read_sized(&o, sizeof o, user, user->struct_size, kOptionsV0Size,
                        api, "options");
  return o;
}

gang::core::DeviceType to_device(int32_t d, const char* api) {
  gang::core::DeviceType out;
  if (!gang::interop::from_public(d, &out)) {
    gang::fail(Status::kInvalidArgument, api, ": options.device_type ", d,
               " is not a gang_device_type_t");
  }
  return out;
}

}  // namespace

namespace gang::abi {

core::GangOptions core_options(const gang_options_t* options, const char* api) {
  const gang_options_t o = read_options(options, api);
  if (o.reserved0 != 0) {
    gang::fail(Status::kInvalidArgument, api, ": options.reserved0 must be 0");
  }
  core::GangOptions g;
  g.backend = o.backend ? o.backend : "";
  g.device_type = to_device(o.device_type, api);
  g.device_index = o.device_index;
  g.rank = o.rank;
  g.size = o.size;
  g.init_method = o.init_method ? o.init_method : "";
  if (o.store) g.store = pin_store(o.store, api);
  g.timeout_ms = o.timeout_ms;
  g.name = o.name ? o.name : "";
  g.debug = o.debug;
  return g;
}

}  // namespace gang::abi

extern "C" {

GANG_API void gang_options_init_v(gang_options_t* options, size_t struct_size) {
  if (options == nullptr || struct_size < kOptionsV0Size) return;
  std::memset(options, 0, struct_size);
  defaults(options);
  options->struct_size = struct_size;
}

GANG_API gang_status_t gang_create(const gang_options_t* options,
                                   gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_create";
  out_arg(out, api, "out");
  *out = nullptr;
  *out = wrap_gang(gang::core::Gang::create(gang::abi::core_options(options, api)));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_create_fake(int rank, int size, gang_t** out) {
  GANG_ABI_TRY
  out_arg(out, "gang_create_fake", "out");
  *out = nullptr;
  *out = wrap_gang(gang::core::Gang::create_fake(rank, size));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_destroy(gang_t* g) {
  GANG_ABI_TRY
  if (g == nullptr) return GANG_OK;
  // The handle dies first, so calls that start from now on are refused.
  // Calls already running hold their own reference: shutdown waits for
  // them (at most the timeout) and aborts the rest, and the last of them
  // to return frees the gang.
  const auto impl = gang::abi::gang_table().remove(g, "gang_destroy");
  if (impl) impl->shutdown();  // null: a forked child forgot its parent's
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_abort(gang_t* g) {
  GANG_ABI_TRY
  pin_gang(g, "gang_abort")->abort();
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API int gang_rank(const gang_t* g) {
  try {
    return pin_gang(g, "gang_rank")->rank();
  } catch (...) {
    return -1;
  }
}

GANG_API int gang_size(const gang_t* g) {
  try {
    return pin_gang(g, "gang_size")->size();
  } catch (...) {
    return -1;
  }
}

GANG_API const char* gang_backend_name(const gang_t* g) {
  try {
    return pin_gang(g, "gang_backend_name")->backend_name();
  } catch (...) {
    return "";
  }
}

GANG_API gang_device_type_t gang_device_type(const gang_t* g) {
  try {
    return gang::interop::to_public(pin_gang(g, "gang_device_type")->device_type());
  } catch (...) {
    return GANG_DEVICE_CPU;
  }
}

GANG_API int gang_device_index(const gang_t* g) {
  try {
    return pin_gang(g, "gang_device_index")->device_index();
  } catch (...) {
    return -1;
  }
}

GANG_API const char* gang_name(const gang_t* g) {
  try {
    return pin_gang(g, "gang_name")->name().c_str();
  } catch (...) {
    return "";
  }
}

GANG_API int gang_root_rank(const gang_t* g, int rank) {
  try {
    return pin_gang(g, "gang_root_rank")->root_rank(rank);
  } catch (...) {
    return -1;
  }
}

GANG_API gang_status_t gang_set_timeout(gang_t* g, int64_t timeout_ms) {
  GANG_ABI_TRY
  const auto impl = pin_gang(g, "gang_set_timeout");
  if (timeout_ms <= 0) {
    gang::fail(Status::kInvalidArgument, "gang_set_timeout: timeout_ms ",
               timeout_ms, " must be positive");
  }
  impl->set_timeout(std::chrono::milliseconds(timeout_ms));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_set_cuda_stream(gang_t* g, void* stream) {
  GANG_ABI_TRY
  pin_gang(g, "gang_set_cuda_stream")->set_stream(stream);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_set_cuda_completion(gang_t* g, gang_cuda_completion_t mode) {
  GANG_ABI_TRY
  auto impl = pin_gang(g, "gang_set_cuda_completion");
  if (mode != GANG_CUDA_COMPLETION_HOST && mode != GANG_CUDA_COMPLETION_STREAM) {
    gang::fail(Status::kInvalidArgument, "gang_set_cuda_completion: mode ",
               static_cast<int>(mode), " is neither GANG_CUDA_COMPLETION_HOST nor "
               "GANG_CUDA_COMPLETION_STREAM");
  }
  impl->set_stream_completion(mode == GANG_CUDA_COMPLETION_STREAM);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API int64_t gang_get_timeout(const gang_t* g) {
  try {
    return pin_gang(g, "gang_get_timeout")->timeout().count();
  } catch (...) {
    return -1;
  }
}

GANG_API gang_status_t gang_get_async_error(const gang_t* g,
                                            gang_status_t* out) {
  GANG_ABI_TRY
  const auto impl = pin_gang(g, "gang_get_async_error");
  *out_arg(out, "gang_get_async_error", "out") =
      gang::abi::to_public(impl->async_error());
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API int gang_supports(const gang_t* g, gang_op_t op, gang_dtype_t dtype) {
  try {
    return pin_gang(g, "gang_supports")
                   ->supports(gang::abi::to_op(op, "gang_supports"),
                              gang::abi::to_dtype(dtype, "gang_supports"))
               ? 1
               : 0;
  } catch (...) {
    return 0;
  }
}

GANG_API gang_status_t gang_split(gang_t* parent, int color, int key,
                                  gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_split";
  out_arg(out, api, "out");
  *out = nullptr;
  const auto impl = pin_gang(parent, api);
  *out = wrap_gang(impl->split(color, key));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_create_subgang(gang_t* parent, const int* ranks,
                                           int n, gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_create_subgang";
  out_arg(out, api, "out");
  *out = nullptr;
  const auto impl = pin_gang(parent, api);
  if (n < 1)
    gang::fail(Status::kInvalidArgument, api, ": n ", n, " must be at least 1");
  out_arg(ranks, api, "ranks");
  *out = wrap_gang(impl->create_subgang(std::vector<int>(ranks, ranks + n)));
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"

#include "base/env.h"

#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace gang::base {

namespace {

#define GANG_ENV_VAR(name, section, meaning) #name,
constexpr const char* kNames[] = {
#include "base/env_vars.def"
};
#undef GANG_ENV_VAR

bool listed(const char* name) {
  for (const char* n : kNames) {
    if (std::strcmp(n, name) == 0) return true;
  }
  return false;
}

}  // namespace

const char* env(const char* name) {
  if (!listed(name)) {
    fail(Status::kInternal, "the environment variable ", name,
         " is read but not listed in base/env_vars.def");
  }
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace gang::base

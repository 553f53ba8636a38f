#include "base/error.h"

namespace gang {

const char* status_name(Status status) {
  switch (static_cast<int>(status)) {
#define GANG_STATUS_NAME_(name, value, msg) \
  case value:                               \
    return #name;
    GANG_STATUS_MAP(GANG_STATUS_NAME_)
#undef GANG_STATUS_NAME_
  }
  return "GANG_STATUS_UNKNOWN";
}

}  // namespace gang

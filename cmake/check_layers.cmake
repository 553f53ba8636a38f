# The include rules of ARCHITECTURE.md, checked on every build:
#   cmake -DSRC=<src dir> -P check_layers.cmake
# A quoted include of a layer the including layer may not use fails the
# build, naming the file, the line and the rule. <gang/...> public headers
# are allowed everywhere except where a rule says otherwise.

# layer -> layers it may include from (its own folder is always allowed).
# interop/ holds the public<->internal enum tables and the exception
# firewall that abi/ (the C shim) and plugin/ (the module host) share.
# abi/ reaches two pure topology headers directly: gang_layout_ranks and
# gang_layout_after_loss are nothing but their functions.
set(ALLOWED_base      "gang/gang_status.h")
set(ALLOWED_store     "base")
set(ALLOWED_topology  "base")
set(ALLOWED_core      "base;store;topology;gang/gang_backend.h;gang/gang.h")
set(ALLOWED_backends  "base;core;store;topology")
set(ALLOWED_interop   "base;core;gang")
set(ALLOWED_plugin    "base;core;store;interop;gang")
set(ALLOWED_abi       "base;core;interop;store/store.h;topology/layout.h;topology/after_loss.h;gang")
set(ALLOWED_launcher  "base;store;gang/gang_version.h")
set(ALLOWED_tools     "gang")
# Backends built as modules (libgang-<name>.so) see gang only through the
# public headers, as a module of someone else's would.
set(MODULES           "backends/nccl/")
set(ALLOWED_module    "gang/gang_backend.h;gang/gang.h;gang/gang_status.h;gang/gang_export.h")

file(GLOB_RECURSE files "${SRC}/*.h" "${SRC}/*.cc" "${SRC}/*.c")
set(errors "")
foreach(f IN LISTS files)
  file(RELATIVE_PATH rel "${SRC}" "${f}")
  string(REGEX MATCH "^[^/]+" layer "${rel}")
  # backends/<name>/...: a backend may use its own folder only.
  set(own "${layer}/")
  if(layer STREQUAL "backends")
    string(REGEX MATCH "^backends/[^/]+/" own "${rel}")
    list(FIND MODULES "${own}" module_at)
    if(NOT module_at EQUAL -1)
      set(layer module)
    endif()
  endif()
  if(NOT DEFINED ALLOWED_${layer})
    continue()
  endif()
  file(STRINGS "${f}" lines REGEX "^#include [\"<]")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^#include [\"<]([^\">]+)[\">]" _ "${line}")
    set(inc "${CMAKE_MATCH_1}")
    # System and third-party headers (no folder of ours) are not checked.
    if(NOT inc MATCHES "^(base|core|store|topology|backends|interop|plugin|abi|launcher|tools|gang)/")
      continue()
    endif()
    string(FIND "${inc}" "${own}" at)
    if(at EQUAL 0)
      continue()
    endif()
    set(ok FALSE)
    foreach(allowed IN LISTS ALLOWED_${layer})
      string(FIND "${inc}" "${allowed}" at)
      if(at EQUAL 0)
        set(ok TRUE)
      endif()
    endforeach()
    if(NOT ok)
      string(APPEND errors "  src/${rel}: ${line}  (${layer}/ may use: ${ALLOWED_${layer}})\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "Includes that break the layering of ARCHITECTURE.md:\n${errors}")
endif()

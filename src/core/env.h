// The core's typed readers of the environment: GANG_* and the launchers'
// (torchrun, Open MPI, PMI, SLURM), through base::env (every variable is a
// row of base/env_vars.def). Values are read at each call, so a program
// (or a test) may change them between gang_create calls.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/env_detect.h"

namespace gang::core::env {

constexpr std::chrono::milliseconds kDefaultTimeout{600000};

// GANG_TIMEOUT_MS if set (a positive integer, else kInvalidArgument naming
// it), otherwise kDefaultTimeout.
std::chrono::milliseconds timeout();

// GANG_WAIT_WARN_S: how often a rank blocked in an operation says so (which
// operation, which ranks it waits for); 0 turns it off. Default 30 s.
constexpr std::chrono::milliseconds kDefaultWaitWarn{30000};
std::chrono::milliseconds wait_warn_interval();

// gang_shrink's window (membership.cc). GANG_SHRINK_FORM_MS: how long the
// agreed survivors have to meet as the new gang before they agree again
// without the missing (default 3000 ms): a whole number of milliseconds,
// else kInvalidArgument naming it. (GANG_SHRINK_SETTLE_MS, the settle
// window of earlier versions, is no longer read: the decider waits for the
// ranks that are alive, docs/elastic.md.)
constexpr std::chrono::milliseconds kDefaultShrinkForm{3000};
std::chrono::milliseconds shrink_form();

// GANG_FAILURE_DETECT_MS: how long a rank's heartbeat may stand still
// before membership changes take it for failed (liveness.h); default 3 s,
// at least 100 ms.
constexpr std::chrono::milliseconds kDefaultFailureDetect{3000};
std::chrono::milliseconds failure_detect();

// GANG_FAULT_POINT, or "": the fault-schedule tests' hook (fault_point.h).
std::string fault_points();

// GANG_SOCKET_IFNAME, or "".
std::string socket_ifname();

// GANG_INIT_METHOD, or "".
std::string init_method();

// Whether GANG_JOIN is set (and not "0"): a launcher (gangrun
// --replace-failed) started this process in place of a failed rank, to
// join the running gang with gang_join. *replaces: GANG_REPLACES (the rank
// it replaces), or "" when unset.
bool joiner(std::string* replaces);

// The launch environment (gang.h's "Environment and launch"): which
// launcher started this process, its rank, size and rendezvous address.
// Throws kInvalidArgument naming the variables when the winning source is
// broken. The rules live in env_detect.cc; this reads the process's
// environment for them.
Launch detect();

// torch_master_from (env_detect.h) over the process's environment.
void torch_master(Launch* l);

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
// GANG_FLIGHT_RECORDER, or "" (also for "0" and "off", which gangrun
// passes on instead of setting one of its own): where each rank dumps its
// recent operations when a gang fails or is asked to ("%r" becomes the
// rank, else ".<rank>" is appended).
std::string flight_recorder_path();

// GANG_DEBUG=detail: check every operation's fingerprint across ranks;
// unset, "" or "off": don't. Any other value is kInvalidArgument naming it.
bool debug_checks();

// GANG_PLUGIN_PATH split at ':' (empty entries dropped), or empty.
std::vector<std::string> plugin_path();

// GANG_LOG_LEVEL (error|warn|info|debug); warn when unset or unknown.
LogLevel log_level();

}  // namespace gang::core::env

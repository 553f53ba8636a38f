// Named points in the membership protocols where the fault-schedule tests
// (tests/chaos/) make a process fail on purpose, at exactly the step they
// mean to test: a decider between its commit and its outcome, a joiner
// right after taking its ticket.
//
// GANG_FAULT_POINT="<name>[:<what>][,...]" (unset in production: the points
// then cost one environment lookup each, on paths that are not hot). At a
// named point the process does <what>: "kill" (the default: SIGKILL
// itself), "stop" (SIGSTOP itself; another process continues it) or
// "sleep=<ms>".
#pragma once

namespace gang::core {

void fault_point(const char* name);

}  // namespace gang::core

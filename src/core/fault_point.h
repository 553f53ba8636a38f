// Named points in the membership protocols and in creation where the
// fault-schedule tests (tests/chaos/, tests/multiproc/) make a process fail on
// purpose, at exactly the step they mean to test: a decider between its
// commit and its outcome, a joiner right after taking its ticket.
//
// GANG_FAULT_POINT="<name>[:<what>][,...]" (unset in production: the points
// then cost one environment lookup each, on paths that are not hot). At a
// named point the process does <what>: "kill" (the default: SIGKILL
// itself), "stop" (SIGSTOP itself; another process continues it) or
// "sleep=<ms>".
//
// The points (membership.cc): shrink.arrive, shrink.decide, shrink.propose
// and shrink.commit, the steps of a shrink round; grow.decided, a member
// once its gang_grow admitted someone, before the grown gang meets;
// join.ticket, join.asked and join.admitted, a joiner after taking its
// ticket, after saying what it asks for, and after reading its place.
// In the shm backend (shm_segment.cc): shm.attach, a rank that has mapped
// the segment (rank 0: and named it) before it counts itself in.
#pragma once

namespace gang::core {

void fault_point(const char* name);

}  // namespace gang::core

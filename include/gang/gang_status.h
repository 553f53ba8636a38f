/*
 * gang_status.h - the one list of gang's status codes.
 *
 * GANG_STATUS_MAP(X) calls X(name, value, message) once per status. gang.h
 * builds gang_status_t, gang_status_name and gang_status_string from it, and
 * the library builds its internal status and the mapping between the two
 * from it, so a status is added in exactly one place. This header holds
 * nothing but the list: it is included by gang.h and needs nothing else.
 * Values: 0 is success, positive is progress, negative is an error.
 */
#ifndef GANG_STATUS_H
#define GANG_STATUS_H

#define GANG_STATUS_MAP(X)                                                     \
  X(GANG_OK, 0, "success")                                                     \
  X(GANG_IN_PROGRESS, 1, "operation in progress")                              \
  X(GANG_ERR_INVALID_ARGUMENT, -1, "invalid argument")                         \
  X(GANG_ERR_UNSUPPORTED, -2, "operation not supported")                       \
  X(GANG_ERR_UNAVAILABLE, -3, "backend or device unavailable")                 \
  X(GANG_ERR_TIMEOUT, -4, "operation timed out")                               \
  X(GANG_ERR_PEER_LOST, -5, "a peer was lost")                                 \
  X(GANG_ERR_MISMATCH, -6, "ranks called different operations")              \
  X(GANG_ERR_ABORTED, -7, "gang aborted or failed")                            \
  X(GANG_ERR_STORE, -8, "rendezvous store error")                              \
  X(GANG_ERR_NO_MEMORY, -9, "out of memory")                                   \
  X(GANG_ERR_SYSTEM, -10, "operating-system or I/O error")                     \
  X(GANG_ERR_INTERNAL, -11, "internal error")

#endif /* GANG_STATUS_H */

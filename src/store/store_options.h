// What a store server defends itself with, and where the numbers come from:
// the GANG_STORE_* variables, read here and nowhere else, so that a server
// hosted by gangrun (which cannot use src/core) and one hosted by a rank
// apply the same limits.
//
//   GANG_STORE_TOKEN               the shared secret clients present first
//   GANG_STORE_MAX_KEY_BYTES       longest key            (default 4096)
//   GANG_STORE_MAX_VALUE_BYTES     largest value          (default 1 GiB)
//   GANG_STORE_MAX_TOTAL_BYTES     bytes a server holds   (default 2 GiB)
//   GANG_STORE_MAX_REQUEST_BYTES   key + value of one request
//                                  (default: the two limits above summed)
//   GANG_STORE_MAX_CONNECTIONS     authenticated connections (default 1024,
//                                  or 4 per rank of a job of more than 256)
//   GANG_STORE_MAX_PENDING_CONNECTIONS
//                                  connections not yet authenticated
//                                  (default 64, or one per 4 ranks of a job
//                                  of more than 256)
//   GANG_STORE_AUTH_TIMEOUT_MS     how long one may stay unauthenticated
//                                  (default 5000)
//   GANG_STORE_IDLE_TIMEOUT_MS     an idle connection     (default 600000)
//   GANG_STORE_REQUEST_TIMEOUT_MS  a half-sent request, a reply not read
//                                  (default 30000)
//   GANG_STORE_ALLOW_USERS         without a token: the users besides the
//                                  server's own whose local processes may
//                                  connect (and, for rank 0 finding its
//                                  port taken, whose server it joins), as
//                                  names or uids separated by commas, or
//                                  "any" for every user
//
// The key and value limits may only be lowered: 4096 bytes and 1 GiB are
// also the wire protocol's limits.
//
// A connection is authenticated once it has shown the token (a server with
// one) or, without a token, once it has passed the user check below and
// sent its first request. Until then it counts against the small pending
// quota only, so strangers that connect and say nothing can never use up
// the connections the job's ranks need.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gang::store {

using Millis = std::chrono::milliseconds;

// The hard limits every implementation enforces, so a value accepted by one
// store is accepted by all; the variables can lower them.
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{1} << 30;
// A token is text of this many bytes at most: letters, digits and -._~+/=
// (what a URL carries unescaped, and base64).
constexpr size_t kMaxTokenBytes = 256;

struct Limits {
  size_t max_key_bytes = kMaxKeyBytes;
  size_t max_value_bytes = kMaxValueBytes;
  // Everything a server holds for its clients: each key and value stored
  // (with kEntryOverheadBytes for the entry), the sizes announced by requests
  // still arriving, and values that replies not yet sent still hold after
  // the key was replaced or deleted.
  size_t max_total_bytes = size_t{2} << 30;
  size_t max_request_bytes = kMaxKeyBytes + kMaxValueBytes;
  // Authenticated connections; a client over it is told to come back
  // (Reply::kBusy) and does, until its timeout.
  size_t max_connections = 1024;
  // Connections not yet authenticated. A new one over the quota pushes out
  // the oldest, which has had the most time to say who it is.
  size_t max_pending_connections = 64;
  // A connection still unauthenticated this long after it was accepted is
  // closed (or after request_timeout, if that is shorter). Clients show
  // their token in their very first bytes, so a few seconds is plenty.
  Millis auth_timeout{5000};
  // A connection with nothing in progress (no request half-read, no reply
  // half-sent, no GET or WAIT parked) for this long is closed.
  Millis idle_timeout{600000};
  // A request half-read, or a reply half-sent, that makes no progress for
  // this long closes its connection.
  Millis request_timeout{30000};
};

// What the server charges per stored key besides its bytes: the map node,
// the strings' headers and the allocator's rounding, so a flood of empty
// values still counts.
constexpr size_t kEntryOverheadBytes = 128;

// Limits from the GANG_STORE_* variables above (unset or empty: the
// default). Throws kInvalidArgument naming the variable for a value that is
// not a number in range. `ranks` (0: not known) is how many ranks a server
// serves: every rank keeps a few connections (its calls, its heartbeat,
// its watch for failures) and a wide job's ranks all connect at once, so
// the connection limits default to kConnectionsPerRank per rank and a
// quarter of the ranks where that is more than the fixed defaults.
constexpr size_t kConnectionsPerRank = 4;
Limits limits_from_env(int ranks = 0);

// GANG_STORE_TOKEN, or "" when it is unset or empty; checked as
// check_token does.
std::string token_from_env();

// Throws kInvalidArgument, naming `where` but never the token, unless token
// is empty or kMaxTokenBytes of the characters above.
void check_token(const std::string& token, const char* where);

// Whether a == b, in time that depends on their lengths only, never on
// where they first differ.
bool same_token(const std::string& a, const std::string& b);

// 32 hex digits from the kernel's random source; throws kSystem when it
// cannot give them.
std::string random_token();

// Which local users a server without a token serves. Without a token,
// TCP says nothing of who connects, so the server asks the kernel which
// user owns the peer's socket (store/socket_owner.h) and serves its own
// user only: another user's process on the same host, started with the
// same address and a rank number, would otherwise join the job and change
// its results. Root is no exception either way: a root server serves root
// only, and root's clients are refused by another user's server, as a
// stray rank would be. A token replaces the check: whoever shows it is
// served, whichever user it is.
//
// Peers on other machines cannot be checked; a server that other machines
// can reach and that has no token says so when it starts.
//
// A process that meant to serve a port without a token and found it taken
// (rank 0 of a tcp:// rendezvous) checks the server there the same way:
// another user's is not the job's store but one that took the port first,
// and is refused unless allowed here.
struct AllowedUsers {
  bool any = false;         // no check at all
  std::vector<uid_t> uids;  // besides the server's own (geteuid())
};

// GANG_STORE_ALLOW_USERS: "" (unset) the server's user only; "any" (or
// "*") every user; else names or uids separated by commas. Throws
// kInvalidArgument naming the variable for a user that does not exist.
AllowedUsers allowed_users_from_env();

// Everything a TCP server needs beyond host and port.
struct ServerOptions {
  std::string token;  // "": no token; local peers are checked by user
  AllowedUsers allowed_users;
  Limits limits;
  // Told (from the server's thread) of each connection it refuses or closes
  // and why, at most about 10 lines a minute plus a count of the rest. The
  // lines never contain a token. Empty: events are only counted.
  std::function<void(const std::string&)> log;
};

// token_from_env(), allowed_users_from_env(), limits_from_env(), and the
// log set below.
ServerOptions server_options_from_env();

// The log of the servers store::open and serve_or_join start from now on
// (a library's own servers, which no caller configures): where the layer
// above sends its warnings. Thread-safe; empty (the default) counts only.
void set_server_log(std::function<void(const std::string&)> log);
std::function<void(const std::string&)> server_log();

}  // namespace gang::store

#include "store/tcp_client.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "base/error.h"
#include "store/socket_owner.h"
#include "store/store_util.h"

namespace gang::store {

using base::UniqueFd;

using detail::Deadline;
using detail::quote;
using net::Io;
using tcp::Op;
using tcp::Reply;

TcpStore::TcpStore(std::string host, int port, Millis timeout,
                   std::string token, std::unique_ptr<TcpStoreServer> server)
    : Store(timeout),
      server_(std::move(server)),
      host_(std::move(host)),
      // The server's own process dials an address the server certainly
      // listens on (loopback when it serves every interface).
      dial_host_(server_ ? server_->local_address() : host_),
      port_(port),
      token_(std::move(token)),
      pool_(dial_host_, port_) {
  // Fails now, naming the url, when no gang store answers there or it
  // refuses the token.
  call(Op::kPing, "", nullptr, 0, Deadline(timeout));
}

TcpStore::~TcpStore() = default;

std::string TcpStore::url() const {
  return "tcp://" + base::host_port(host_, port_);
}

UniqueFd TcpStore::take_connection(const Deadline& deadline, bool* fresh) {
  std::string error;
  bool gone = false;
  UniqueFd fd = pool_.take(deadline, &error, fresh, &gone);
  if (gone || (!fd.valid() && pool_.refusing())) {
    fail(Status::kStore, "store: ", url(), " is gone: it answered before, and now refuses "
         "connections (", error,
         "). Its server lived in a process that ended, such as rank 0's in a job "
         "launched without gangrun; keep the store apart from the ranks: launch with "
         "gangrun, whose launcher serves it, or start one with `gangrun --store-only "
         "HOST:PORT` and point GANG_INIT_METHOD at tcp://HOST:PORT");
  }
  if (!fd.valid()) {
    fail(Status::kStore, "store: cannot reach ", url(), " within ",
         timeout().count(), " ms: ", error);
  }
  return fd;
}

void TcpStore::check_server_user() {
  // A token proves the server is the job's; so does serving it ourselves.
  if (!token_.empty() || server_) return;
  const AllowedUsers allowed = allowed_users_from_env();
  if (allowed.any) return;
  bool fresh = false;
  UniqueFd fd = take_connection(Deadline(timeout()), &fresh);
  SocketOwner owner = peer_owner(fd.get());
  // The server's end may still be on its way to being accepted: a moment
  // later it is connected.
  for (int i = 0; i < 10 && owner.kind == SocketOwner::kUnowned; ++i) {
    std::this_thread::sleep_for(Millis(1));
    owner = peer_owner(fd.get());
  }
  // Another machine, or one that cannot be told: nothing to go by (a
  // tokenless store that other machines reach warned as it started).
  if (owner.kind == SocketOwner::kFound && owner.uid != ::geteuid() &&
      std::find(allowed.uids.begin(), allowed.uids.end(), owner.uid) ==
          allowed.uids.end()) {
    throw Denied(
        Status::kStore,
        str_cat("store: ", url(),
                ", the port this process was to serve the "
                "job's store on, is served by another user, ",
                user_name(owner.uid),
                ", without a token: not this job's store, but one that took "
                "its port first. Use another port, or, to share a store "
                "between users, give the server and every rank the same "
                "GANG_STORE_TOKEN (or set GANG_STORE_ALLOW_USERS=",
                owner.uid, " here)"));
  }
  pool_.give_back(std::move(fd));
}

namespace {

bool is_refusal(Reply r) {
  return r == Reply::kDenied || r == Reply::kRefused || r == Reply::kBusy;
}

// Reads one reply to `op` into *answer.
Io read_reply(int fd, Op op, TcpStore::Answer* answer,
              const Deadline& deadline) {
  uint8_t reply[tcp::kReplyHeaderBytes];
  Io io = net::recv_all(fd, reply, sizeof reply, deadline);
  if (io.kind != Io::kOk) return io;
  tcp::ReplyHeader rh;
  if (const char* why = tcp::decode_reply(op, reply, &rh)) {
    return {Io::kMalformed, why};
  }
  answer->replied = true;
  answer->status = rh.status;
  answer->value.resize(rh.value_len);
  return net::recv_all(fd, answer->value.data(), answer->value.size(),
                       deadline);
}

}  // namespace

Io TcpStore::exchange(int fd, bool fresh, Op op, const std::string& key,
                      const uint8_t* value, size_t n, const Deadline& deadline,
                      Answer* answer) {
  // A new connection presents the token first; the request follows in the
  // same write, and the AUTH reply is read before the request's.
  const bool auth = fresh && !token_.empty();
  uint8_t auth_header[tcp::kRequestHeaderBytes];
  tcp::RequestHeader ah;
  ah.op = Op::kAuth;
  ah.key_len = static_cast<uint32_t>(token_.size());
  tcp::encode_request(ah, auth_header);

  tcp::RequestHeader h;
  h.op = op;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = n;
  uint8_t header[tcp::kRequestHeaderBytes];
  tcp::encode_request(h, header);
  // iovec is not const-correct; sendmsg only reads these.
  iovec iov[5];
  int count = 0;
  if (auth) {
    iov[count++] = {auth_header, sizeof auth_header};
    iov[count++] = {const_cast<char*>(token_.data()), token_.size()};
  }
  iov[count++] = {header, sizeof header};
  iov[count++] = {const_cast<char*>(key.data()), key.size()};
  iov[count++] = {const_cast<uint8_t*>(value), n};
  Io io = net::send_all(fd, iov, count, deadline);
  if (io.kind == Io::kClosed) {
    // A server that refused the request (too large, the store full, no
    // token) answered before it closed: read why, if it is there.
    Answer late;
    const Io said =
        read_reply(fd, auth ? Op::kAuth : op, &late, Deadline(Millis(100)));
    if (said.kind == Io::kOk && is_refusal(late.status)) {
      *answer = std::move(late);
      return said;
    }
    return io;
  }
  if (io.kind != Io::kOk) return io;
  if (auth) {
    io = read_reply(fd, Op::kAuth, answer, deadline);
    if (io.kind != Io::kOk || is_refusal(answer->status)) return io;
  }
  return read_reply(fd, op, answer, deadline);
}

// A connection that fails or times out mid-exchange is dropped rather than
// returned: a late reply on it would answer the next request.
TcpStore::Answer TcpStore::call(Op op, const std::string& key,
                                const uint8_t* value, size_t n,
                                const Deadline& deadline) {
  Answer answer;
  Io io;
  net::Backoff backoff;
  int turned_away = 0;
  for (int attempt = 0;; ++attempt) {
    bool fresh = false;
    UniqueFd fd = take_connection(deadline, &fresh);
    answer = Answer();
    io = exchange(fd.get(), fresh, op, key, value, n, deadline, &answer);
    if (io.kind == Io::kOk && !is_refusal(answer.status)) {
      pool_.give_back(std::move(fd));
      return answer;
    }
    // Turned away before anything was done (kBusy: the server is full, or
    // strangers crowd its queue of connections yet to authenticate), or a
    // new connection closed before any reply: come back, until the
    // deadline, so that idle strangers cannot keep a job from starting. A
    // close is taken as "nothing was done" only where it must be: before
    // the AUTH reply, the server has carried out nothing on a connection;
    // without a token, an ADD it may have carried out is never repeated.
    const bool busy = io.kind == Io::kOk && answer.status == Reply::kBusy;
    const bool dropped = io.kind == Io::kClosed && fresh && !answer.replied &&
                         (op != Op::kAdd || !token_.empty());
    if (busy || dropped) {
      turned_away += busy;
      backoff.wait(deadline);
      // Out of time: this attempt's outcome is the one to report.
      if (deadline.expired()) break;
      continue;
    }
    // A kept connection the server closed just as it was taken (its idle
    // timeout) never served the request: another one may. Not an ADD,
    // which must never count twice.
    const bool retry =
        io.kind == Io::kClosed && !fresh && op != Op::kAdd && attempt == 0;
    if (!retry) break;
  }

  const std::string what =
      key.empty() ? str_cat("store ", tcp::op_name(op))
                  : str_cat("store ", tcp::op_name(op), ": key ", quote(key));
  if (io.kind == Io::kOk && answer.status == Reply::kBusy) {
    const std::string message(answer.value.begin(), answer.value.end());
    fail(Status::kStore, what, ": ", url(), " turned this client away ",
         turned_away, " times until its timeout (", timeout().count(),
         " ms): ", message);
  }
  if (io.kind == Io::kOk) {
    // The server's own words, which never hold a token.
    const std::string message(answer.value.begin(), answer.value.end());
    if (answer.status == Reply::kDenied) {
      throw Denied(Status::kStore, str_cat(what, ": ", url(),
                                           " refused this client: ", message));
    }
    fail(Status::kStore, what, ": ", url(), " refused the request: ", message);
  }
  switch (io.kind) {
    case Io::kOk:
      break;
    case Io::kTimeout:
      if (op == Op::kGet || op == Op::kWait) {
        detail::fail_missing(tcp::op_name(op), key, timeout());
      }
      fail(Status::kTimeout, what, ": ", url(), " did not answer within ",
           timeout().count(), " ms");
    case Io::kClosed:
      fail(Status::kStore, what, ": ", url(), " closed the connection",
           op == Op::kPing ? " (is it a gang store server of this version?)"
                           : "");
    case Io::kFailed:
      fail(Status::kStore, what, ": talking to ", url(),
           " failed: ", io.detail);
    case Io::kMalformed:
      fail(Status::kStore, what, ": ", url(), " answered with a malformed ",
           "reply (", io.detail, ")");
  }
  fail(Status::kInternal, what, ": unknown I/O outcome");
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  call(Op::kSet, key, value.data(), value.size(), Deadline(timeout()));
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  return call(Op::kGet, key, nullptr, 0, Deadline(timeout)).value;
}

namespace {

// A window of gets: at most this many, and this many bytes of requests, so
// that a window's requests always fit the sockets' buffers and the client
// never waits to write while the server waits for it to read.
constexpr size_t kWindowGets = 128;
constexpr size_t kWindowBytes = 16 * 1024;

// Sends gets of keys[from, end) in one write, then reads their replies in
// order into values; returns how many it read, all of them only when the
// connection is fit to be kept.
size_t get_window(int fd, const std::vector<std::string>& keys, size_t from, size_t end,
                  const Deadline& deadline, std::vector<Bytes>* values) {
  std::vector<uint8_t> requests;
  for (size_t i = from; i < end; ++i) {
    tcp::RequestHeader h;
    h.op = Op::kGet;
    h.key_len = static_cast<uint32_t>(keys[i].size());
    uint8_t header[tcp::kRequestHeaderBytes];
    tcp::encode_request(h, header);
    requests.insert(requests.end(), header, header + sizeof header);
    requests.insert(requests.end(), keys[i].begin(), keys[i].end());
  }
  if (net::send_all(fd, requests.data(), requests.size(), deadline).kind != Io::kOk) return 0;
  for (size_t i = from; i < end; ++i) {
    TcpStore::Answer answer;
    if (read_reply(fd, Op::kGet, &answer, deadline).kind != Io::kOk ||
        answer.status != Reply::kOk) {
      return i - from;
    }
    (*values)[i] = std::move(answer.value);
  }
  return end - from;
}

}  // namespace

// Each window's first get goes alone through call(), which connects and
// authenticates however it must and keeps the connection; the rest of the
// window follows on that connection in one write. Whatever a window could
// not read is asked again through call(), which retries or fails as a
// single get does.
std::vector<Bytes> TcpStore::get_many(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  std::vector<Bytes> values(keys.size());
  size_t done = 0;
  while (done < keys.size()) {
    try {
      values[done] = call(Op::kGet, keys[done], nullptr, 0, deadline).value;
    } catch (const Error& e) {
      if (e.status() != Status::kTimeout) throw;
      break;
    }
    ++done;
    size_t end = done, bytes = 0;
    while (end < keys.size() && end - done < kWindowGets &&
           bytes + tcp::kRequestHeaderBytes + keys[end].size() <= kWindowBytes) {
      bytes += tcp::kRequestHeaderBytes + keys[end].size();
      ++end;
    }
    if (end == done) continue;
    bool fresh = false;
    UniqueFd fd = take_connection(deadline, &fresh);
    // A connection of its own (another thread holds the kept one) would
    // need the token first: the next call() makes one that has it.
    if (fresh && !token_.empty()) continue;
    const size_t got = get_window(fd.get(), keys, done, end, deadline, &values);
    if (got == end - done) pool_.give_back(std::move(fd));
    done += got;
  }
  values.resize(done);
  return values;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  uint8_t payload[8];
  tcp::put_u64(payload, static_cast<uint64_t>(delta));
  const Answer answer =
      call(Op::kAdd, key, payload, sizeof payload, Deadline(timeout()));
  if (answer.status == Reply::kBadAdd) {
    // The server's own message, which names the key.
    fail(Status::kInvalidArgument,
         std::string(answer.value.begin(), answer.value.end()));
  }
  return static_cast<int64_t>(tcp::get_u64(answer.value.data()));
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  for (const auto& key : keys) call(Op::kWait, key, nullptr, 0, deadline);
}

void TcpStore::remove(const std::string& key) {
  check_key(key);
  call(Op::kDelete, key, nullptr, 0, Deadline(timeout()));
}

bool TcpStore::check(const std::string& key) {
  check_key(key);
  return call(Op::kCheck, key, nullptr, 0, Deadline(timeout())).status ==
         Reply::kOk;
}

}  // namespace gang::store

#include "store/store.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/text.h"
#include "store/file_store.h"
#include "store/memory_store.h"
#include "store/prefix_store.h"
#include "store/redis_store.h"
#include "store/store_util.h"
#include "store/tcp_client.h"
#include "store/tcp_server.h"
#include "store/torch_store.h"

namespace gang::store {

std::vector<Bytes> Store::get_many(const std::vector<std::string>& keys, Millis timeout) {
  const detail::Deadline deadline(timeout);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  try {
    for (const auto& key : keys) values.push_back(get(key, deadline.remaining_ms()));
  } catch (const Error& e) {
    if (e.status() != Status::kTimeout) throw;
  }
  return values;
}

std::vector<Bytes> Store::get_all(const std::vector<std::string>& keys, Millis timeout) {
  const detail::Deadline deadline(timeout);
  std::vector<Bytes> values = get_many(keys, timeout);
  // A key that came late still may; one that never comes fails as get does.
  while (values.size() < keys.size()) {
    values.push_back(get(keys[values.size()], std::max(Millis(1), deadline.remaining_ms())));
  }
  return values;
}

namespace {

[[noreturn]] void fail_url(const std::string& url, const std::string& why) {
  fail(Status::kInvalidArgument, "store: malformed url \"", redact_url(url),
       "\": ", why,
       " (expected tcp://host:port[?token=T], torch://host:port, "
       "redis://host:port[/prefix], file:///dir or memory://name)");
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "host:port" or "[v6 address]:port".
void parse_host_port(const std::string& url, const std::string& rest,
                     std::string* host, int* port) {
  std::string port_text;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() ||
        rest[close + 1] != ':') {
      fail_url(url, "a bracketed host must be followed by :port");
    }
    *host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos) fail_url(url, "no port");
    *host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    if (host->find(':') != std::string::npos) {
      fail_url(url,
               "an IPv6 host must be in brackets, as in tcp://[::1]:29500");
    }
  }
  if (host->empty()) fail_url(url, "no host");
  if (host->find_first_of("/?#@ ") != std::string::npos) {
    fail_url(url, "only host:port is understood here, with no path or user");
  }
  if (!all_digits(port_text) || port_text.size() > 5 ||
      std::stoi(port_text) > 65535) {
    fail_url(url, "the port must be a number from 0 to 65535");
  }
  *port = std::stoi(port_text);
}

// A tcp url: host, port and the token of its query ("?token=T"), if any.
struct TcpUrl {
  std::string host;
  int port = 0;
  bool has_token = false;
  std::string token;
};

TcpUrl parse_tcp(const std::string& url, const std::string& rest) {
  TcpUrl t;
  const size_t q = rest.find('?');
  parse_host_port(url, rest.substr(0, q), &t.host, &t.port);
  if (q == std::string::npos) return t;
  const std::string query = rest.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    const size_t amp = std::min(query.find('&', start), query.size());
    const std::string param = query.substr(start, amp - start);
    if (param.rfind("token=", 0) != 0) {
      fail_url(url, "the only query a tcp url takes is ?token=...");
    }
    if (t.has_token) fail_url(url, "the token is given twice");
    t.has_token = true;
    t.token = param.substr(6);
    check_token(t.token, "store");
    start = amp + 1;
  }
  return t;
}

// The url's token, else GANG_STORE_TOKEN's.
std::string token_of(const TcpUrl& t) {
  return t.has_token ? t.token : token_from_env();
}

// `ranks`: how many ranks the server is for (0: not known).
ServerOptions server_options(const TcpUrl& t, int ranks = 0) {
  ServerOptions o;
  o.token = token_of(t);
  o.allowed_users = allowed_users_from_env();
  o.limits = limits_from_env(ranks);
  o.log = server_log();
  return o;
}

}  // namespace

std::string redact_url(const std::string& url) {
  std::string out = url;
  size_t at = 0;
  while ((at = out.find("token=", at)) != std::string::npos) {
    at += 6;
    size_t end = out.find('&', at);
    if (end == std::string::npos) end = out.size();
    out.replace(at, end - at, "***");
  }
  return out;
}

std::shared_ptr<Store> connect_tcp(const std::string& host, int port,
                                   Millis timeout, const std::string& token) {
  if (timeout <= Millis(0)) {
    fail(Status::kInvalidArgument, "store: the timeout for tcp://",
         base::host_port(host, port), " must be positive, not ",
         timeout.count(), " ms");
  }
  check_token(token, "store");
  return std::make_shared<TcpStore>(host, port, timeout, token);
}

std::shared_ptr<Store> open(const std::string& url, bool is_server,
                            Millis timeout) {
  if (timeout <= Millis(0)) {
    fail(Status::kInvalidArgument, "store: the timeout for \"", url,
         "\" must be positive, not ", timeout.count(), " ms");
  }
  const size_t sep = url.find("://");
  if (sep == std::string::npos) fail_url(url, "no scheme");
  const std::string scheme = url.substr(0, sep);
  const std::string rest = url.substr(sep + 3);

  if (scheme == "tcp") {
    TcpUrl t = parse_tcp(url, rest);
    if (!is_server) {
      if (t.port == 0) fail_url(url, "a client needs a nonzero port");
      return std::make_shared<TcpStore>(std::move(t.host), t.port, timeout,
                                        token_of(t));
    }
    ServerOptions options = server_options(t);
    const std::string token = options.token;
    auto server =
        std::make_unique<TcpStoreServer>(t.host, t.port, std::move(options));
    const int bound = server->port();
    return std::make_shared<TcpStore>(std::move(t.host), bound, timeout, token,
                                      std::move(server));
  }
  if (scheme == "torch") {
    if (is_server) {
      fail_url(url,
               "gang speaks PyTorch's TCPStore protocol as a client only; "
               "serve a tcp:// store instead");
    }
    std::string host;
    int port = 0;
    parse_host_port(url, rest, &host, &port);
    if (port == 0) fail_url(url, "a client needs a nonzero port");
    return std::make_shared<TorchStore>(std::move(host), port, timeout);
  }
  if (scheme == "redis") {
    // The data lives in the Redis server, so is_server has nothing to serve,
    // as for file and memory stores. A path is a key prefix.
    const size_t slash = rest.find('/');
    const std::string authority = rest.substr(0, slash);
    const std::string prefix =
        slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (authority.find('@') != std::string::npos) {
      fail_url(url, "redis stores with a user or password are not supported");
    }
    std::string host;
    int port = 0;
    parse_host_port(url, authority, &host, &port);
    if (port == 0) fail_url(url, "a redis store needs a nonzero port");
    return std::make_shared<RedisStore>(std::move(host), port, prefix, timeout);
  }
  if (scheme == "file") {
    // file://host/dir names a remote host, which we cannot reach.
    if (rest.empty() || rest[0] != '/') {
      fail_url(url,
               "a file store needs an absolute directory, as in "
               "file:///tmp/gang");
    }
    return std::make_shared<FileStore>(rest, timeout);
  }
  if (scheme == "memory") {
    if (rest.empty()) fail_url(url, "a memory store needs a name");
    return std::make_shared<MemoryStore>(rest, timeout);
  }
  if (scheme == "env") {
    fail_url(url,
             "env:// is torch's rendezvous at MASTER_ADDR:MASTER_PORT, which "
             "gang_create takes as an init method; a store needs its address");
  }
  fail_url(url, str_cat("unknown scheme \"", scheme, "\""));
}

std::shared_ptr<Store> serve_or_join(const std::string& url, Millis timeout,
                                     bool* served,
                                     const std::string& bind_host, int ranks) {
  if (timeout <= Millis(0)) {
    fail(Status::kInvalidArgument, "store: the timeout for \"", url,
         "\" must be positive, not ", timeout.count(), " ms");
  }
  if (url.rfind("tcp://", 0) != 0) fail_url(url, "serve_or_join needs tcp://");
  TcpUrl t = parse_tcp(url, url.substr(6));
  ServerOptions options = server_options(t, ranks);
  const std::string token = options.token;
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = std::make_unique<TcpStoreServer>(
        bind_host.empty() ? t.host : bind_host, t.port, std::move(options));
  } catch (const PortInUse&) {
    // Someone serves the port already: a launcher that hosts the store
    // (gangrun), or an earlier gang_store_create in this job. The client's
    // PING tells whether it is a gang store at all; without a token, the
    // user who serves it tells whether it can be the job's.
    if (served) *served = false;
    auto client =
        std::make_shared<TcpStore>(std::move(t.host), t.port, timeout, token);
    client->check_server_user();
    return client;
  }
  if (served) *served = true;
  const int bound = server->port();
  return std::make_shared<TcpStore>(std::move(t.host), bound, timeout, token,
                                    std::move(server));
}

std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix) {
  if (!inner) {
    fail(Status::kInvalidArgument, "store: with_prefix(\"", prefix,
         "\") needs a store");
  }
  const Millis timeout = inner->timeout();
  return std::make_shared<PrefixStore>(std::move(inner), prefix, timeout);
}

std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix, Millis timeout) {
  if (!inner) {
    fail(Status::kInvalidArgument, "store: with_prefix(\"", prefix,
         "\") needs a store");
  }
  return std::make_shared<PrefixStore>(std::move(inner), prefix, timeout);
}

void Store::check_key(const std::string& key) const {
  if (key.empty()) fail(Status::kInvalidArgument, "store: a key is empty");
  if (key.size() > limits_.max_key_bytes) {
    fail(Status::kInvalidArgument, "store: key ", detail::quote(key),
         " is longer than the limit of ", limits_.max_key_bytes, " bytes",
         limits_.max_key_bytes < kMaxKeyBytes ? " (GANG_STORE_MAX_KEY_BYTES)"
                                              : "");
  }
}

void Store::check_value_size(const std::string& key, size_t n) const {
  if (n > limits_.max_value_bytes) {
    fail(Status::kInvalidArgument, "store: the value for key ",
         detail::quote(key), " has ", n, " bytes, over the limit of ",
         limits_.max_value_bytes,
         limits_.max_value_bytes < kMaxValueBytes
             ? " (GANG_STORE_MAX_VALUE_BYTES)"
             : "");
  }
}

}  // namespace gang::store

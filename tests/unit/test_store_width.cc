// test_store_width.cc - what the store does for a wide job (src/store).
// Store::get_many: the values of many keys in order, in windows of gets on
// one connection for the TCP store; what it returns when a key is late (the
// keys before it); tokens; values larger than a window's replies; the
// prefix and recording stores passing it on; the stores that read key by
// key. And the connection limits a server for a job of N ranks takes.
// Compiled with the store's objects.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

// Before cmocka, whose fail() macro would clash with gang's fail().
#include "base/text.h"
#include "store/recording_store.h"
#include "store/store.h"

extern "C" {
#include <cmocka.h>
}

namespace {

using gang::str_cat;
using gang::store::Bytes;
using gang::store::Store;
using Millis = std::chrono::milliseconds;

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string text(const Bytes& b) { return std::string(b.begin(), b.end()); }

// A served tcp store and a second client of it.
struct Served {
  std::shared_ptr<Store> server;
  std::shared_ptr<Store> client;
};

Served serve(const std::string& query = "") {
  Served s;
  s.server = gang::store::open("tcp://127.0.0.1:0" + query, true, Millis(10000));
  s.client = gang::store::open(str_cat("tcp://127.0.0.1:", s.server->port(), query), false,
                               Millis(10000));
  return s;
}

std::vector<std::string> keys_of(int n, const std::string& stem = "k") {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(str_cat(stem, i));
  return keys;
}

// Every value, in order, across several windows (more keys than one
// window's gets and bytes).
void test_tcp_reads_every_key_in_order(void**) {
  Served s = serve();
  const auto keys = keys_of(1000);
  for (size_t i = 0; i < keys.size(); ++i) s.server->set(keys[i], bytes(str_cat("value ", i)));
  const auto values = s.client->get_many(keys, Millis(5000));
  assert_int_equal(values.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    assert_string_equal(text(values[i]).c_str(), str_cat("value ", i).c_str());
  }
  // The connection stays fit: a plain get and a second read work after it.
  assert_string_equal(text(s.client->get("k7")).c_str(), "value 7");
  assert_int_equal(s.client->get_many(keys, Millis(5000)).size(), keys.size());
}

// Replies larger than the server's output queue (256 KiB) and the sockets'
// buffers: the client reads them while the rest of the window waits.
void test_tcp_large_values(void**) {
  Served s = serve();
  const auto keys = keys_of(40, "big");
  for (size_t i = 0; i < keys.size(); ++i) {
    s.server->set(keys[i], Bytes(100000 + i, static_cast<uint8_t>(i)));
  }
  const auto values = s.client->get_many(keys, Millis(10000));
  assert_int_equal(values.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    assert_int_equal(values[i].size(), 100000 + i);
    assert_int_equal(values[i].front(), static_cast<uint8_t>(i));
    assert_int_equal(values[i].back(), static_cast<uint8_t>(i));
  }
}

// A key that never comes: the values before it, after the timeout.
void test_tcp_late_key_returns_those_before(void**) {
  Served s = serve();
  auto keys = keys_of(300);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i != 200) s.server->set(keys[i], bytes(str_cat(i)));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto values = s.client->get_many(keys, Millis(300));
  const auto took = std::chrono::steady_clock::now() - start;
  assert_int_equal(values.size(), 200);
  assert_string_equal(text(values[199]).c_str(), "199");
  assert_true(took >= Millis(250));
  assert_true(took < Millis(5000));
  // A key that comes while the read waits for it is read, and so is the rest.
  std::thread late([&] {
    std::this_thread::sleep_for(Millis(100));
    s.server->set(keys[200], bytes("200"));
  });
  const auto all = s.client->get_many(keys, Millis(5000));
  late.join();
  assert_int_equal(all.size(), keys.size());
  assert_string_equal(text(all[200]).c_str(), "200");
  assert_string_equal(text(all[299]).c_str(), "299");
  // No key at all: nothing, not an error.
  assert_int_equal(s.client->get_many({"never"}, Millis(50)).size(), 0);
}

// With a token: the windows' requests follow the connection's AUTH.
void test_tcp_with_token(void**) {
  Served s = serve("?token=get-many-secret");
  const auto keys = keys_of(500);
  for (size_t i = 0; i < keys.size(); ++i) s.server->set(keys[i], bytes(str_cat(i * 3)));
  const auto values = s.client->get_many(keys, Millis(5000));
  assert_int_equal(values.size(), keys.size());
  assert_string_equal(text(values[499]).c_str(), "1497");
}

// A bad key is refused before anything is sent, as get refuses it.
void test_bad_key_is_refused(void**) {
  Served s = serve();
  bool threw = false;
  try {
    s.client->get_many({"ok", ""}, Millis(100));
  } catch (const gang::Error& e) {
    threw = e.status() == gang::Status::kInvalidArgument;
  }
  assert_true(threw);
}

// The prefix store reads its own keys; the recording store passes through.
void test_prefix_and_recording_pass_it_on(void**) {
  Served s = serve();
  auto prefixed = gang::store::with_prefix(s.client, "job/");
  auto recorded = std::make_shared<gang::store::RecordingStore>(prefixed);
  const auto keys = keys_of(200);
  for (size_t i = 0; i < keys.size(); ++i) s.server->set("job/" + keys[i], bytes(str_cat(i)));
  s.server->set(keys[5], bytes("not under the prefix"));
  const auto values = recorded->get_many(keys, Millis(5000));
  assert_int_equal(values.size(), keys.size());
  assert_string_equal(text(values[5]).c_str(), "5");
}

// The stores that read key by key: the same answers.
void test_key_by_key_stores(void**) {
  auto memory = gang::store::open("memory://get-many", false, Millis(1000));
  const auto keys = keys_of(50);
  for (size_t i = 0; i + 1 < keys.size(); ++i) memory->set(keys[i], bytes(str_cat(i)));
  const auto some = memory->get_many(keys, Millis(100));
  assert_int_equal(some.size(), keys.size() - 1);
  assert_string_equal(text(some[48]).c_str(), "48");
  memory->set(keys.back(), bytes("49"));
  assert_int_equal(memory->get_many(keys, Millis(100)).size(), keys.size());
}

// A server for a wide job takes connections for every rank of it, and for
// them all to connect at once; a narrow or unknown job keeps the defaults;
// the variables still win.
void test_limits_grow_with_the_job(void**) {
  using gang::store::limits_from_env;
  const char* const names[] = {"GANG_STORE_MAX_CONNECTIONS",
                               "GANG_STORE_MAX_PENDING_CONNECTIONS"};
  std::string was[2];
  bool set[2] = {false, false};
  for (int i = 0; i < 2; ++i) {
    if (const char* v = getenv(names[i])) was[i] = v, set[i] = true;
  }
  unsetenv("GANG_STORE_MAX_CONNECTIONS");
  unsetenv("GANG_STORE_MAX_PENDING_CONNECTIONS");
  const auto fixed = limits_from_env();
  assert_int_equal(fixed.max_connections, 1024);
  assert_int_equal(fixed.max_pending_connections, 64);
  assert_int_equal(limits_from_env(8).max_connections, 1024);
  assert_int_equal(limits_from_env(256).max_pending_connections, 64);
  const auto wide = limits_from_env(4096);
  assert_int_equal(wide.max_connections, 4096 * gang::store::kConnectionsPerRank);
  assert_int_equal(wide.max_pending_connections, 1024);
  setenv("GANG_STORE_MAX_CONNECTIONS", "100", 1);
  setenv("GANG_STORE_MAX_PENDING_CONNECTIONS", "10", 1);
  const auto asked = limits_from_env(4096);
  assert_int_equal(asked.max_connections, 100);
  assert_int_equal(asked.max_pending_connections, 10);
  for (int i = 0; i < 2; ++i) {
    if (set[i]) {
      setenv(names[i], was[i].c_str(), 1);
    } else {
      unsetenv(names[i]);
    }
  }
}

// A server opened for a job of 2,000 ranks serves 1,500 connections at once
// (each with a get in progress), past the fixed default of 1024.
void test_server_for_a_wide_job_serves_them_all(void**) {
  bool served = false;
  auto server = gang::store::serve_or_join("tcp://127.0.0.1:0", Millis(20000), &served, "", 2000);
  assert_true(served);
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < 1500; ++i) {
    try {
      clients.push_back(gang::store::open(str_cat("tcp://127.0.0.1:", server->port()), false,
                                          Millis(5000)));
    } catch (const gang::Error& e) {
      fail_msg("client %d of 1500 could not connect: %s", i, e.what());
    }
  }
  // Every client parks a get on its own connection, then the key comes.
  std::vector<std::thread> waiting;
  std::vector<int> got(clients.size(), 0);
  for (size_t i = 0; i < clients.size(); ++i) {
    waiting.emplace_back([&, i] {
      // A client turned away comes back until its timeout; at the fixed
      // limit, 476 of them find the rest's connections still open then.
      try {
        got[i] = text(clients[i]->get("go", Millis(5000))) == "now";
      } catch (const gang::Error&) {
      }
    });
  }
  std::this_thread::sleep_for(Millis(500));
  server->set("go", bytes("now"));
  for (auto& t : waiting) t.join();
  for (size_t i = 0; i < clients.size(); ++i) assert_int_equal(got[i], 1);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_reads_every_key_in_order),
      cmocka_unit_test(test_tcp_large_values),
      cmocka_unit_test(test_tcp_late_key_returns_those_before),
      cmocka_unit_test(test_tcp_with_token),
      cmocka_unit_test(test_bad_key_is_refused),
      cmocka_unit_test(test_prefix_and_recording_pass_it_on),
      cmocka_unit_test(test_key_by_key_stores),
      cmocka_unit_test(test_limits_grow_with_the_job),
      cmocka_unit_test(test_server_for_a_wide_job_serves_them_all),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

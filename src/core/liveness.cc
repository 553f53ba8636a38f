#include "core/liveness.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/process.h"
#include "base/secret.h"
#include "core/env.h"
#include "store/store.h"

namespace gang::core {

namespace {

constexpr const char* kBeatPrefix = "gang/alive/";

// A forked child is another process: another token, and a registry of its
// own (the parent's lock may have been held at the fork; it is left alone).
struct Process {
  const Process* parent = nullptr;  // the parent's, kept (never released)
  pid_t pid = ::getpid();
  std::string token = base::hex(base::random_bytes(8));
  // What its heartbeat threads add to. They keep a pointer to it, not a
  // copy: a forked child has none of those threads, and a copy on their
  // stacks would look leaked there.
  std::string beat_key = kBeatPrefix + token;
  std::mutex mu;
  std::vector<std::weak_ptr<store::Store>> beating;
};

Process& self() {
  static std::atomic<Process*> current{new Process()};
  Process* p = current.load();
  if (p->pid != ::getpid()) {
    // Never freed: the parent's copy, and its lock, are not this process's.
    auto* fresh = new Process();
    fresh->parent = p;
    if (current.compare_exchange_strong(p, fresh)) return *fresh;
    delete fresh;
    return *current.load();
  }
  return *p;
}

std::string read_link(const char* path) {
  char buf[256];
  const ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
}

// The kernel and PID namespace a pid means something in (GANG_HOST_ID, which
// tests and containers may set, does not say).
const std::string& scope() {
  static const std::string s = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    std::getline(in, boot);
    std::string link = read_link("/proc/self/ns/pid");
    std::replace(link.begin(), link.end(), ' ', '_');
    return (boot.empty() ? std::string("?") : boot) + "/" + link;
  }();
  return s;
}

Millis detect_interval() {
  try {
    return env::failure_detect();
  } catch (const Error&) {
    return env::kDefaultFailureDetect;
  }
}

void beat(std::weak_ptr<store::Store> weak, const std::string* key) {
  for (;;) {
    {
      std::shared_ptr<store::Store> s = weak.lock();
      if (!s) return;
      try {
        s->add(*key, 1);
      } catch (...) {
        // The store is slow or gone: the beat stands still, as it should.
      }
    }
    std::this_thread::sleep_for(
        std::clamp(detect_interval() / 4, Millis(25), Millis(1000)));
  }
}

}  // namespace

std::string self_record() {
  return str_cat(self().token, " ", scope(), " ", ::getpid());
}

bool parse_who(const std::string& text, Who* who) {
  const size_t a = text.find(' ');
  const size_t b = a == std::string::npos ? a : text.find(' ', a + 1);
  if (b == std::string::npos) return false;
  who->token = text.substr(0, a);
  who->scope = text.substr(a + 1, b - a - 1);
  who->pid = std::atoi(text.c_str() + b + 1);
  return who->pid > 0;
}

std::string beat_key(const Who& who) { return kBeatPrefix + who.token; }

bool ended_here(const Who& who) {
  return who.scope == scope() && base::process_ended(who.pid);
}

void keep_beating(const std::shared_ptr<store::Store>& store) {
  if (!store) return;
  Process& p = self();
  try {
    std::lock_guard<std::mutex> lock(p.mu);
    auto& v = p.beating;
    v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }),
            v.end());
    for (const auto& w : v) {
      if (w.lock() == store) return;
    }
    v.push_back(store);
    std::thread(beat, std::weak_ptr<store::Store>(store), &p.beat_key).detach();
  } catch (...) {
    // No thread: this process's beat stands still, and peers take it for
    // failed only after the detection interval of a membership change.
  }
}

void publish_self(store::Store& store, const std::string& prefix, int rank) {
  const std::string record = self_record();
  store.set(str_cat(prefix, "who/", rank), store::Bytes(record.begin(), record.end()));
}

PeerWatch::PeerWatch(std::shared_ptr<store::Store> store, std::string prefix, int size)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      peers_(static_cast<size_t>(size)),
      detect_(detect_interval()) {}

bool PeerWatch::read_record(int r) {
  Peer& p = peers_[static_cast<size_t>(r)];
  if (p.known) return true;
  std::string text;
  try {
    const store::Bytes b = store_->get(str_cat(prefix_, "who/", r), Millis(1));
    text.assign(b.begin(), b.end());
  } catch (const Error& e) {
    if (e.status() != Status::kTimeout) throw;
    return false;
  }
  p.known = parse_who(text, &p.who);
  return p.known;
}

void PeerWatch::know(int r, const Who& who) {
  Peer& p = peers_[static_cast<size_t>(r)];
  p.who = who;
  p.known = who.pid > 0;
}

bool PeerWatch::failed(int r, std::string* why) {
  Peer& p = peers_[static_cast<size_t>(r)];
  const Clock::time_point now = Clock::now();
  if (p.asked_since == Clock::time_point{}) p.asked_since = now;
  if (!read_record(r)) {
    if (now - p.asked_since < detect_) return false;
    if (why) *why = str_cat("it recorded no liveness and was silent for ", detect_.count(), " ms");
    return true;
  }
  if (ended_here(p.who)) {
    if (why) *why = str_cat("its process (pid ", p.who.pid, ") has ended");
    return true;
  }
  if (store_->add(str_cat(prefix_, "dead/", r), 0) > 0) {
    if (why) *why = "a rank on its host found its process ended";
    return true;
  }
  const int64_t b = store_->add(kBeatPrefix + p.who.token, 0);
  if (b != p.beat) {
    p.beat = b;
    p.beat_since = now;
    return false;
  }
  if (now - p.beat_since < detect_) return false;
  if (why) {
    *why = str_cat("its heartbeat stood still for ", detect_.count(),
                   " ms (GANG_FAILURE_DETECT_MS): it is stopped, gone with its host, or cut off");
  }
  return true;
}

void PeerWatch::mark_ended_neighbours() {
  for (size_t r = 0; r < peers_.size(); ++r) {
    Peer& p = peers_[r];
    if (p.marked || !read_record(static_cast<int>(r))) continue;
    if (ended_here(p.who)) {
      store_->add(str_cat(prefix_, "dead/", r), 1);
      p.marked = true;
    }
  }
}

}  // namespace gang::core

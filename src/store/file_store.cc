#include "store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/private_dir.h"
#include "store/store_util.h"
#include "base/unique_fd.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Deadline;
using detail::errno_text;
using detail::quote;

// Names of files that are not keys start with '.', which no key's file name
// does (see encode_name).
constexpr const char* kLockName = ".lock";
constexpr const char* kTempPrefix = ".tmp.";

// Below NAME_MAX (255) with room for the hashed suffix.
constexpr size_t kMaxPlainName = 200;
constexpr size_t kHashedHead = 160;

bool plain_byte(unsigned char c, size_t pos) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9') || c == '_' || c == '-') {
    return true;
  }
  return c == '.' && pos > 0;
}

// Percent-encodes the key so '/' makes no subdirectory and the name stays
// readable in `ls`.
std::string encode_name(const std::string& key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string name;
  name.reserve(key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (plain_byte(c, i)) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 0xf];
    }
  }
  return name;
}

uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// 128 bits from two differently seeded lanes; collisions are also detected
// on read, so this needs to be well spread, not cryptographic.
std::string hash_hex(const std::string& key) {
  uint64_t a = 0xcbf29ce484222325ULL;
  uint64_t b = 0x9e3779b97f4a7c15ULL ^ key.size();
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    a = (a ^ c) * 0x100000001b3ULL;
    b = (b + c + 1) * 0xbf58476d1ce4e5b9ULL;
    b ^= b >> 29;
  }
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx",
                static_cast<unsigned long long>(mix64(a)),
                static_cast<unsigned long long>(mix64(b)));
  return buf;
}

std::string temp_name() {
  // pid alone could repeat across the hosts sharing an NFS directory.
  static const uint64_t salt = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  return str_cat(kTempPrefix, ::getpid(), ".", std::hex, salt, ".",
                 counter.fetch_add(1));
}

// Sleeps a little before the next look at the directory: 1 ms doubling to
// 10 ms, never past the deadline.
void nap(const Deadline& deadline, Millis* backoff) {
  const auto left = deadline.remaining();
  std::this_thread::sleep_for(
      std::min<detail::Clock::duration>(*backoff, left));
  *backoff = std::min(*backoff * 2, Millis(10));
}

void write_all(int fd, const uint8_t* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t done = ::write(fd, data, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      fail(Status::kSystem, "file store: cannot write ", path, ": ",
           errno_text(errno));
    }
    data += done;
    n -= static_cast<size_t>(done);
  }
}

// Unlinks a temporary file unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!kept_) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void keep() { kept_ = true; }

 private:
  std::string path_;
  bool kept_ = false;
};

}  // namespace

// Where a key lives. A key whose encoding is too long for a file name gets a
// readable head plus "~" and a hash ('~' is always encoded, so only such
// names contain it); its file starts with a u32 length and the key, so two
// keys sharing a name are caught instead of one returning the other's value.
struct FileStore::Location {
  std::string path;
  bool hashed = false;
};

FileStore::FileStore(std::string dir, Millis timeout)
    : Store(timeout), dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  // The keys (the pair-authentication secret among them) are as private
  // as the directory: one another user owns or may write to would let them
  // read the job's secret, join it, or plant its files.
  base::make_private_dir(dir_, "file store");
}

FileStore::Location FileStore::locate(const std::string& key) const {
  std::string name = encode_name(key);
  Location loc;
  if (name.size() > kMaxPlainName) {
    size_t head = kHashedHead;
    // Do not split a %XX escape.
    if (name[head - 1] == '%') {
      head -= 1;
    } else if (name[head - 2] == '%') {
      head -= 2;
    }
    name = name.substr(0, head) + "~" + hash_hex(key);
    loc.hashed = true;
  }
  loc.path = dir_ + "/" + name;
  return loc;
}

bool FileStore::read(const std::string& key, Bytes* value) const {
  const Location loc = locate(key);
  UniqueFd fd(::open(loc.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return false;
    fail(Status::kSystem, "file store: cannot open ", loc.path, ": ",
         errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    fail(Status::kSystem, "file store: cannot stat ", loc.path, ": ",
         errno_text(errno));
  }
  // Files are renamed into place complete and never rewritten, so the size
  // is final; reading to EOF anyway guards against a shorter file.
  Bytes data(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(Status::kSystem, "file store: cannot read ", loc.path, ": ",
           errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  if (loc.hashed) {
    const size_t header = 4 + key.size();
    bool same = data.size() >= header;
    if (same) {
      const uint32_t len = uint32_t{data[0]} | uint32_t{data[1]} << 8 |
                           uint32_t{data[2]} << 16 | uint32_t{data[3]} << 24;
      same = len == key.size() &&
             std::equal(key.begin(), key.end(), data.begin() + 4);
    }
    if (!same) {
      fail(Status::kSystem, "file store: ", loc.path, " holds another key ",
           "than ", quote(key), " (a hash collision or a stray file)");
    }
    data.erase(data.begin(), data.begin() + static_cast<ptrdiff_t>(header));
  }
  *value = std::move(data);
  return true;
}

bool FileStore::exists(const std::string& key) const {
  const Location loc = locate(key);
  if (loc.hashed) {
    Bytes ignored;
    return read(key, &ignored);
  }
  if (::access(loc.path.c_str(), F_OK) == 0) return true;
  if (errno == ENOENT) return false;
  fail(Status::kSystem, "file store: cannot look up ", loc.path, ": ",
       errno_text(errno));
}

// Readers only ever see a complete value: it is written to a temporary file
// and renamed over the key's file, which is atomic within a directory.
// There is no fsync: rendezvous keys need not survive a crash of the host.
void FileStore::write(const std::string& key, const Bytes& value) const {
  const Location loc = locate(key);
  TempFile tmp(dir_ + "/" + temp_name());
  UniqueFd fd(::open(tmp.path().c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    fail(Status::kSystem, "file store: cannot create ", tmp.path(), ": ",
         errno_text(errno));
  }
  if (loc.hashed) {
    const auto len = static_cast<uint32_t>(key.size());
    const uint8_t header[4] = {
        static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8),
        static_cast<uint8_t>(len >> 16), static_cast<uint8_t>(len >> 24)};
    write_all(fd.get(), header, sizeof header, tmp.path());
    write_all(fd.get(), reinterpret_cast<const uint8_t*>(key.data()),
              key.size(), tmp.path());
  }
  write_all(fd.get(), value.data(), value.size(), tmp.path());
  // NFS reports some write errors only at close.
  if (::close(fd.release()) != 0) {
    fail(Status::kSystem, "file store: cannot write ", tmp.path(), ": ",
         errno_text(errno));
  }
  if (::rename(tmp.path().c_str(), loc.path.c_str()) != 0) {
    fail(Status::kSystem, "file store: cannot rename ", tmp.path(), " to ",
         loc.path, ": ", errno_text(errno));
  }
  tmp.keep();
}

void FileStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  write(key, value);
}

Bytes FileStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  const Deadline deadline(timeout);
  Millis backoff(1);
  Bytes value;
  while (!read(key, &value)) {
    if (deadline.expired()) detail::fail_missing("get", key, timeout);
    nap(deadline, &backoff);
  }
  return value;
}

// The read-modify-write holds an exclusive flock() on the directory's lock
// file, so adds from any process on the host (or NFS clients, where flock is
// forwarded) never lose an update. The lock is taken without blocking and
// retried, so a stuck holder costs a timeout, not a hang.
int64_t FileStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  const Deadline deadline(timeout());
  const std::string lock_path = dir_ + "/" + kLockName;
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock.valid()) {
    fail(Status::kSystem, "file store: cannot open ", lock_path, ": ",
         errno_text(errno));
  }
  Millis backoff(1);
  while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      fail(Status::kSystem, "file store: cannot lock ", lock_path, ": ",
           errno_text(errno));
    }
    if (deadline.expired()) {
      fail(Status::kTimeout, "store add: key ", quote(key), ": ", lock_path,
           " stayed locked for ", timeout().count(), " ms");
    }
    nap(deadline, &backoff);
  }
  Bytes current;
  const bool present = read(key, &current);
  const int64_t sum =
      detail::add_decimal(key, present ? &current : nullptr, delta);
  write(key, detail::decimal_bytes(sum));
  return sum;  // closing `lock` releases the flock
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  for (const auto& key : keys) {
    Millis backoff(1);
    while (!exists(key)) {
      if (deadline.expired()) detail::fail_missing("wait", key, timeout);
      nap(deadline, &backoff);
    }
  }
}

void FileStore::remove(const std::string& key) {
  check_key(key);
  const Location loc = locate(key);
  if (::unlink(loc.path.c_str()) != 0 && errno != ENOENT) {
    fail(Status::kSystem, "file store: cannot remove ", loc.path, ": ",
         errno_text(errno));
  }
}

}  // namespace gang::store

#include "launcher/output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "launcher/platform.h"

namespace gang::launcher {

namespace {

// A line longer than this is forwarded in pieces, each piece a line.
constexpr size_t kMaxLine = 64 * 1024;
// Read per wake-up from one pipe, so one chatty rank does not starve others.
constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

void Sink::write(const std::string& data) {
  if (broken_ || data.empty()) return;
  if (!write_all(fd_, data.data(), data.size())) broken_ = true;
}

OutputStream::OutputStream(base::UniqueFd pipe, Sink* console,
                           std::string prefix, std::shared_ptr<Sink> tee)
    : pipe_(std::move(pipe)),
      console_(console),
      prefix_(std::move(prefix)),
      tee_(std::move(tee)) {}

bool OutputStream::pump() {
  if (!open()) return false;
  char buf[kReadChunk];
  const ssize_t n = ::read(pipe_.get(), buf, sizeof buf);
  if (n > 0) {
    forward(buf, static_cast<size_t>(n), false);
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
    return true;
  }
  close();  // end of file, or an error that will not go away
  return false;
}

void OutputStream::close() {
  if (!open()) return;
  forward(nullptr, 0, true);
  pipe_.reset();
}

void OutputStream::forward(const char* data, size_t n, bool flush_partial) {
  std::string console_text;
  std::string tee_text;
  auto emit = [&](const char* line, size_t len) {
    console_text.append(prefix_);
    console_text.append(line, len);
    console_text.push_back('\n');
    if (tee_) {
      tee_text.append(line, len);
      tee_text.push_back('\n');
    }
  };
  size_t pos = 0;
  while (pos < n) {
    const void* nl = std::memchr(data + pos, '\n', n - pos);
    if (!nl) {
      partial_.append(data + pos, n - pos);
      break;
    }
    const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - data);
    if (partial_.empty()) {
      emit(data + pos, end - pos);
    } else {
      partial_.append(data + pos, end - pos);
      emit(partial_.data(), partial_.size());
      partial_.clear();
    }
    pos = end + 1;
  }
  while (partial_.size() >= kMaxLine) {
    emit(partial_.data(), kMaxLine);
    partial_.erase(0, kMaxLine);
  }
  if (flush_partial && !partial_.empty()) {
    emit(partial_.data(), partial_.size());
    partial_.clear();
  }
  console_->write(console_text);
  if (tee_) tee_->write(tee_text);
}

}  // namespace gang::launcher

// Forwarding a rank's output: whole lines, optionally prefixed, to gangrun's
// own stdout or stderr, and optionally to a per-rank log file.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "base/unique_fd.h"

namespace gang::launcher {

// Where lines go. Once a write fails (a closed pipe) the sink drops what
// follows, so ranks are still drained and never block on a full pipe.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}
  explicit Sink(base::UniqueFd owned)
      : fd_(owned.get()), owned_(std::move(owned)) {}
  void write(const std::string& data);

 private:
  int fd_;
  base::UniqueFd owned_;
  bool broken_ = false;
};

class OutputStream {
 public:
  // pipe: the read end (non-blocking); console: where lines go; prefix:
  // put before each line ("" for none); tee: also gets every line, without
  // the prefix (nullptr for none).
  OutputStream(base::UniqueFd pipe, Sink* console, std::string prefix,
               std::shared_ptr<Sink> tee);

  int fd() const { return pipe_.get(); }
  bool open() const { return pipe_.valid(); }

  // Reads what the pipe has and forwards its complete lines. At end of file
  // it forwards the rest and closes the pipe. Returns whether still open.
  bool pump();
  // Forwards a partial last line and closes the pipe.
  void close();

 private:
  void forward(const char* data, size_t n, bool flush_partial);

  base::UniqueFd pipe_;
  Sink* console_;
  std::string prefix_;
  std::shared_ptr<Sink> tee_;
  std::string partial_;  // a line not yet ended by '\n'
};

}  // namespace gang::launcher

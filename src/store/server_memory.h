// The TCP store server's memory, counted: a Budget of bytes (the total
// limit), Reservations drawn from it that give their bytes back when they
// go, and a Buffer that grows only as bytes arrive. Single-threaded: one
// server thread owns a budget and everything drawn from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

namespace gang::store {

class Budget {
 public:
  explicit Budget(size_t limit) : limit_(limit) {}

  size_t limit() const { return limit_; }
  size_t held() const { return held_; }
  size_t available() const { return limit_ - held_; }

  // Takes n bytes if they fit under the limit.
  bool take(size_t n) {
    if (n > available()) return false;
    held_ += n;
    return true;
  }
  // Takes n bytes even past the limit: for what must be held anyway (a
  // reply being sent), so it still counts against what comes next.
  void force(size_t n) { held_ += n; }
  void give_back(size_t n) { held_ -= n < held_ ? n : held_; }

 private:
  size_t limit_;
  size_t held_ = 0;
};

// Bytes taken from a budget, given back when the reservation is destroyed.
// The budget must outlive it.
class Reservation {
 public:
  Reservation() = default;
  // Takes n bytes; valid() says whether they fit.
  Reservation(Budget* budget, size_t n)
      : budget_(budget->take(n) ? budget : nullptr), bytes_(budget_ ? n : 0) {}
  // Takes n bytes whether or not they fit (Budget::force); always valid.
  static Reservation forced(Budget* budget, size_t n) {
    budget->force(n);
    Reservation r;
    r.budget_ = budget;
    r.bytes_ = n;
    return r;
  }
  Reservation(Reservation&& o) noexcept
      : budget_(std::exchange(o.budget_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  Reservation& operator=(Reservation&& o) noexcept {
    if (this != &o) {
      reset();
      budget_ = std::exchange(o.budget_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() { reset(); }

  bool valid() const { return budget_ != nullptr; }
  size_t bytes() const { return bytes_; }

  // Moves n of these bytes (n <= bytes()) into a reservation of their own.
  Reservation split(size_t n) {
    Reservation part;
    if (budget_ == nullptr || n > bytes_) return part;
    part.budget_ = budget_;
    part.bytes_ = n;
    bytes_ -= n;
    return part;
  }

  void reset() {
    if (budget_ != nullptr) budget_->give_back(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
  }

 private:
  Budget* budget_ = nullptr;
  size_t bytes_ = 0;
};

// A byte buffer that grows to at most a known final size, allocating in
// steps as data is appended, never what a header merely announced. realloc
// lets large buffers grow in place (mremap) instead of copying.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const uint8_t* data, size_t n) {
    grow_to(n);
    append(data, n);
  }
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data_); }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // Appends n bytes; the buffer will hold at most `final_size` bytes, so it
  // never grows past that. Throws std::bad_alloc.
  void append(const uint8_t* p, size_t n, size_t final_size) {
    if (size_ + n > capacity_) {
      // Doubling, from 64 KiB, capped at the final size: a few reallocs for
      // a large value, none past what it will hold.
      size_t want = capacity_ < kFirstStep ? kFirstStep : capacity_ * 2;
      if (want < size_ + n) want = size_ + n;
      if (want > final_size) want = final_size;
      if (want < size_ + n) want = size_ + n;
      grow_to(want);
    }
    if (n > 0) __builtin_memcpy(data_ + size_, p, n);
    size_ += n;
  }
  void append(const uint8_t* p, size_t n) { append(p, n, size_ + n); }

 private:
  static constexpr size_t kFirstStep = size_t{64} << 10;

  void grow_to(size_t capacity) {
    if (capacity <= capacity_ || capacity == 0) return;
    void* p = std::realloc(data_, capacity);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    capacity_ = capacity;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace gang::store

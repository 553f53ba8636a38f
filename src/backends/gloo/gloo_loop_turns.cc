#include "backends/gloo/gloo_loop_turns.h"

#include <gloo/transport/tcp/device.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <sched.h>

namespace gang::backends::gloo_impl {

namespace tcp = ::gloo::transport::tcp;

// An eventfd in the device's loop, level-triggered: readable (so the loop
// turns without waiting) while held at least once, drained when the last
// holder lets go.
class LoopProdder final : public tcp::Handler {
 public:
  // Joins the device's loop (throws as Gloo does when it cannot); the
  // caller keeps `fd` then.
  LoopProdder(tcp::Device* device, int fd) : device_(device), fd_(fd) {
    device_->registerDescriptor(fd_, EPOLLIN, this);
  }

  ~LoopProdder() override {
    // Leaving the loop waits for a turn too: a prompt one.
    hold();
    try {
      device_->unregisterDescriptor(fd_, this);
    } catch (...) {
    }
    ::close(fd_);
  }

  // The loop calls this on every turn while the eventfd is readable: it
  // gives way, since whoever holds the prodder waits for the loop's next
  // turn and may need this core to get there.
  void handleEvents(int) override { sched_yield(); }

  void hold() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_++ == 0) {
      const uint64_t one = 1;
      (void)!::write(fd_, &one, sizeof one);
    }
  }

  void release() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (--held_ == 0) {
      uint64_t count = 0;
      (void)!::read(fd_, &count, sizeof count);
    }
  }

 private:
  tcp::Device* const device_;
  const int fd_;
  std::mutex mu_;
  int held_ = 0;
};

namespace {

// The prodders of this process's devices, by device.
struct Prodders {
  std::mutex mu;
  std::map<const tcp::Device*, std::weak_ptr<LoopProdder>> of;
};

Prodders& prodders() {
  static auto* p = new Prodders();  // never destroyed: devices may outlive statics
  return *p;
}

// A device and its prodder, which (declared after it) leaves the loop
// first.
struct Prompted {
  std::shared_ptr<tcp::Device> device;
  std::shared_ptr<LoopProdder> prodder;
  ~Prompted() {
    std::lock_guard<std::mutex> lock(prodders().mu);
    prodders().of.erase(device.get());
  }
};

}  // namespace

PromptTurns::PromptTurns(const tcp::Device* device) noexcept {
  {
    std::lock_guard<std::mutex> lock(prodders().mu);
    auto it = prodders().of.find(device);
    if (it != prodders().of.end()) prodder_ = it->second.lock();
  }
  if (prodder_) prodder_->hold();
}

PromptTurns::~PromptTurns() {
  if (prodder_) prodder_->release();
}

std::shared_ptr<tcp::Device> with_prompt_turns(std::shared_ptr<tcp::Device> device) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // Without a descriptor to spare the loop keeps its own pace.
  if (fd < 0) return device;
  auto held = std::make_shared<Prompted>();
  held->device = std::move(device);
  try {
    held->prodder = std::make_shared<LoopProdder>(held->device.get(), fd);
  } catch (...) {
    ::close(fd);
    return std::move(held->device);
  }
  {
    std::lock_guard<std::mutex> lock(prodders().mu);
    prodders().of[held->device.get()] = held->prodder;
  }
  tcp::Device* raw = held->device.get();
  return std::shared_ptr<tcp::Device>(std::move(held), raw);
}

}  // namespace gang::backends::gloo_impl

// Prompt turns of a Gloo device's event loop.
//
// Gloo's loop, asked by another thread to stop watching a descriptor,
// returns only once the loop has begun its next turn, so that no event of
// that descriptor is handled afterwards; and an idle loop turns only every
// 10 ms. Each connection a rank makes or closes outside the loop (a pair
// is born with a listening socket that it gives up at once, and closes its
// connection when done) would wait up to 10 ms for nothing: on a gloo gang
// of 2 ranks, most of the creation's time.
//
// A device made by make_device carries a descriptor of its own in its loop
// that is ready exactly while somebody holds a PromptTurns: the loop then
// turns at once and again, and such a wait lasts one turn.
#pragma once

#include <memory>

namespace gloo::transport::tcp {
class Device;
}

namespace gang::backends::gloo_impl {

class LoopProdder;

// Held around a call that waits for a turn of `device`'s loop. Does
// nothing for a device make_device did not make; harmless on the loop's
// own thread, where Gloo does not wait. Never throws.
class PromptTurns {
 public:
  explicit PromptTurns(const ::gloo::transport::tcp::Device* device) noexcept;
  ~PromptTurns();
  PromptTurns(const PromptTurns&) = delete;
  PromptTurns& operator=(const PromptTurns&) = delete;

 private:
  std::shared_ptr<LoopProdder> prodder_;
};

// Gives `device` (a Gloo TCP device) its prodder; the device keeps it for
// as long as it lives. For make_device.
std::shared_ptr<::gloo::transport::tcp::Device> with_prompt_turns(
    std::shared_ptr<::gloo::transport::tcp::Device> device);

}  // namespace gang::backends::gloo_impl

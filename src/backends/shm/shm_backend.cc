#include "backends/shm/shm_backend.h"

#include "backends/shm/shm_collectives.h"
#include "base/error.h"
#include "core/collective.h"
#include "core/log.h"
#include "core/registry.h"
#include "store/store.h"

namespace gang::backends::shm_impl {

namespace {

// Staging bytes per rank and channel: data, fingerprints, control.
constexpr uint32_t kSlotBytes[kChannels] = {1u << 20, 16u << 10, 64u << 10};

int channel_index(core::Channel c) {
  switch (c) {
    case core::Channel::kData: return 0;
    case core::Channel::kFingerprint: return 1;
    case core::Channel::kControl: return 2;
  }
  return 0;
}

}  // namespace

ShmBackend::ShmBackend(const core::BackendConfig& config,
                       std::shared_ptr<Segment> segment)
    : rank_(config.rank), size_(config.size), segment_(std::move(segment)) {
  if (segment_) {
    waiter_ = std::make_shared<Waiter>(*segment_, rank_, config.name);
    p2p_ = make_p2p_engine(segment_, waiter_, rank_);
  }
  caps_.warns_while_waiting = true;  // shm_wait.cc, naming the ranks
  caps_.uses_store_later = false;     // the segment is found at creation
  caps_.any_source = true;            // shm_p2p.cc
  channels_[channel_index(core::Channel::kFingerprint)].broadcasts_meet = true;
  channels_[channel_index(core::Channel::kControl)].broadcasts_meet = true;
}

ShmBackend::~ShmBackend() = default;

core::BackendWorkPtr ShmBackend::post(const core::Operation& op) {
  // A gang of one never posts here: the core computes its operations.
  if (!segment_) fail(Status::kInternal, "shm: an operation of a gang of one reached the backend");
  waiter_->check();
  if (core::is_p2p(op.args.kind)) return post_p2p(p2p_, op);
  const int channel = channel_index(op.channel);
  std::lock_guard<std::mutex> lock(channel_mu_[channel]);
  try {
    run_collective(*segment_, *waiter_, rank_, channel, channels_[channel], op);
  } catch (const Error& e) {
    // Peers waiting for this rank would otherwise wait for the deadline.
    // Not for a timeout: every rank waits for the same late peer and says
    // so itself, naming it.
    if (e.status() != Status::kTimeout) fail_everyone(e);
    throw;
  }
  return nullptr;
}

void ShmBackend::fail_everyone(const Error& why) noexcept {
  if (waiter_) waiter_->fail_gang(why);
}

void ShmBackend::abort() noexcept {
  if (!waiter_ || waiter_->aborted()) return;
  waiter_->abort();
  try {
    fail_everyone(error(Status::kAborted, "rank ", Rank{rank_}, " aborted"));
  } catch (...) {
    // No memory for the message: the peers still see the process go.
  }
}

namespace {

std::unique_ptr<core::Backend> make_shm(const core::BackendConfig& c) {
  if (c.size == 1) return std::make_unique<ShmBackend>(c, nullptr);
  if (!c.store) fail(Status::kInternal, "shm: a gang of size ", c.size, " has no store");
  // Every rank must be on this host (numbered at rendezvous).
  if (c.host_of.size() != static_cast<size_t>(c.size)) {
    fail(Status::kInternal, "shm: a gang of size ", c.size, " came with ",
         c.host_of.size(), " host numbers");
  }
  for (int r = 0; r < c.size; ++r) {
    if (c.host_of[static_cast<size_t>(r)] != c.host_of[static_cast<size_t>(c.rank)]) {
      fail(Status::kUnsupported, "gang_create: the shm backend needs every "
           "rank on one host, but rank ", r, " runs on another host than rank ",
           c.rank);
    }
  }
  std::shared_ptr<Segment> segment =
      Segment::open(*c.store, c.rank, c.size, kSlotBytes, c.deadline);
  GANG_LOG(kInfo, "shm: rank ", c.rank, " of ", c.size, " attached; single copy ",
           segment->single_copy() ? "on" : "off (copies in and out)");
  return std::make_unique<ShmBackend>(c, std::move(segment));
}

core::BackendInfo shm_info() {
  core::BackendInfo info;
  info.name = "shm";
  info.devices = {core::DeviceType::kCpu};
  // Above Gloo: "auto" picks it for every CPU gang of one host.
  info.priority = 20;
  info.one_host_only = true;
  info.create = make_shm;
  return info;
}

const core::BackendRegistrar kRegisterShm(shm_info());

}  // namespace

}  // namespace gang::backends::shm_impl

// The shared memory of one shm gang: a header, per-rank blocks, for each
// channel (data, fingerprint, control) a barrier and one staging slot per
// rank, and a mailbox per ordered pair of ranks for sends and receives
// (the file is sparse: a mailbox's pages exist once a pair talks).
//
// The segment is an anonymous memory file (memfd) of rank 0. The other ranks
// open it through /proc/<pid>/fd/<fd> of rank 0, which the store names, and
// map it; once all have (a counter in the segment), every rank closes its
// file and only the mappings keep it. Nothing is ever named in /dev/shm, so
// nothing can be left behind, whoever dies when.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/collective.h"

namespace gang::store {
class Store;
}

namespace gang::backends::shm_impl {

constexpr int kChannels = 3;
constexpr size_t kLine = 64;

// An operation whose input is at most this many bytes a rank (an
// all-reduce or reduce of up to 44 floats, a barrier; Run::goes_inline)
// travels in its rank's description: the peers wait for the description
// itself, check it and read the input from it, with no barrier and no
// slot. The first line of a description holds its turn, the check and
// the first 48 bytes, so that a peer reads one cache line for an input of
// up to 48 bytes.
constexpr size_t kInlineBytes = 176;

// What a rank says about the operation it is in, for the others to check.
// Published by its turn: the writer clears `turn` (kUnpublished), fills the
// rest and stores `turn` last (release); a reader that finds the turn it
// expects (acquire) has the whole description, since a rank never rewrites
// a description a peer may still expect (kDescs below). So a rank may read
// a peer's description while it waits, not only after a meeting.
struct alignas(kLine) OpDesc {
  std::atomic<uint64_t> turn;  // the operation's number on its channel
  // seq, sig and history hashed (Run::check_of): equal checks are the same
  // operation, but for a chance of 2^-64, and where they differ the fields
  // below name the difference.
  uint64_t check;
  uint8_t payload[kInlineBytes];  // an inline operation's input
  uint64_t seq;   // the core's number (a debug check shares its operation's)
  core::OpSignature sig;  // what every rank must pass alike
  uint64_t addr;     // single copy: where this rank's peers read its buffer
  uint64_t history;  // the broadcasts that did not meet before this one (below)
};
static_assert(offsetof(OpDesc, payload) + 48 == kLine,
              "an inline input of 48 bytes shares its description's first line");
constexpr uint64_t kUnpublished = ~uint64_t{0};

// Per rank, per channel: written by that rank only. Descriptions by the
// operation's turn modulo kDescs: a rank can be two operations ahead of a
// peer that still reads its description (a root of broadcasts that do not
// meet, shm_run.cc), never more.
constexpr uint64_t kDescs = 4;

// A word some ranks may sleep on, and how many do (see Barrier).
struct alignas(kLine) Signal {
  std::atomic<uint32_t> value;
  std::atomic<uint32_t> sleepers;
};

// A broadcast that did not meet, as one rank ran it. `history` is a hash
// of every such broadcast on the channel up to this one (number, seq,
// root, dtype, count, outer): two ranks with equal histories ran the same
// ones.
// Kept for the last kRecent by number, so that a difference can be named;
// published like OpDesc, by `number` (ranks are at most a few broadcasts
// apart, well within kRecent).
struct BroadcastRecord {
  std::atomic<uint64_t> number;  // published last; kUnpublished while written
  uint64_t turn;                 // the operation's turn on the channel
  uint64_t seq;
  int32_t root;
  uint32_t dtype;
  uint64_t count;
  uint64_t outer;  // core::CollectiveArgs::outer
  uint64_t history;
};
constexpr uint64_t kRecent = 8;

struct alignas(kLine) RankChannel {
  OpDesc desc[kDescs];
  // Broadcasts that do not meet (shm_run.cc): how many this rank
  // has posted as the root (the number of its last one, plus one), and how
  // many it has finished, whoever the root.
  Signal posted;
  Signal consumed;
  // The low half of turn + 1 of this rank's last inline operation, for a
  // peer that waits for its description to sleep on.
  Signal joined;
  // Meetings this rank has entered on the channel: a peer that waits at a
  // meeting knows who has not come.
  alignas(kLine) std::atomic<uint64_t> arrived;
  BroadcastRecord recent[kRecent];
};

struct alignas(kLine) RankBlock {
  std::atomic<int32_t> pid;
  RankChannel channel[kChannels];
};

// Per channel: a generation barrier (the futex word), its counter, and how
// many ranks sleep (or are about to) on the word: the last rank to arrive
// makes the wake-up system call only when some do.
struct alignas(kLine) Barrier {
  std::atomic<uint32_t> count;
  alignas(kLine) std::atomic<uint32_t> generation;
  std::atomic<uint32_t> sleepers;
};

// Point-to-point, per ordered pair of ranks and channel (shm_p2p.h).
constexpr int kP2PChannels = 2;     // data, control
constexpr uint32_t kRing = 256;     // messages posted and not yet received, per mailbox
constexpr size_t kMailBytes = 64 << 10;

enum MsgState : uint32_t { kFree = 0, kPosted = 1, kClaimed = 2, kRejected = 3 };

struct alignas(kLine) MsgHeader {
  std::atomic<uint32_t> state;
  uint32_t tag;
  uint64_t bytes;
  uint64_t id;
  uint64_t expected;  // kRejected: the size the receiver wanted
};

struct Mailbox {
  alignas(kLine) std::atomic<uint64_t> claim;    // id + 1 of the message streaming; 0: none
  alignas(kLine) std::atomic<uint64_t> filled;   // bytes of it the sender has put in data
  alignas(kLine) std::atomic<uint64_t> drained;  // bytes of it the receiver has taken
  alignas(kLine) std::atomic<uint32_t> bell;     // bumped on every change (futex word)
  MsgHeader ring[kRing];
  alignas(kLine) uint8_t data[kMailBytes];
};

struct alignas(kLine) Header {
  uint64_t magic;
  int32_t size;
  uint32_t slot_bytes[kChannels];
  // Set by a rank that aborts or fails; every waiter then gives up. The
  // first rank to fail claims the record, fills it and then sets `failed`.
  alignas(kLine) std::atomic<uint32_t> failed;
  std::atomic<uint32_t> failed_claim;
  int32_t failed_rank;
  int32_t failed_status;  // gang::Status
  // Its message with its facts (gang::Text): the texts, each ended by
  // kTextEnd, and the ranks between them (Waiter::fail_gang).
  uint32_t failed_nranks;
  int32_t failed_ranks[16];
  char failed_why[512];
  // Single copy: rank 0's address of this header, which every other rank
  // tries to read with process_vm_readv while it attaches; set if one of
  // them could not (or GANG_SHM_SINGLE_COPY=0 there).
  alignas(kLine) uint64_t rank0_header;
  std::atomic<uint32_t> no_single_copy;
  // Rank 0's choices, so that every rank makes the same: single copies for
  // gathers of every size from 32 KiB (GANG_SHM_SINGLE_COPY=always there),
  // and whether the gang has more ranks than the host has cores.
  uint32_t single_copy_always;
  uint32_t more_ranks_than_cores;
  // Attaching (Segment::attach): each rank adds itself to `attached` once
  // it has mapped the segment; rank 0 then sets `attach_outcome` for the
  // others to kAttachedAll, or, with its message in attach_why, to
  // kAttachFailed when a rank cannot attach and kAttachTimedOut when one
  // did not by the deadline.
  alignas(kLine) std::atomic<uint32_t> attached;
  std::atomic<uint32_t> attach_outcome;
  char attach_why[512];
};
enum AttachOutcome : uint32_t {
  kAttaching = 0,
  kAttachedAll = 1,
  kAttachFailed = 2,
  kAttachTimedOut = 3,
};

class Segment {
 public:
  // Creates (rank 0) or attaches to (the others) the segment of a gang of
  // `size` ranks through `store`, by `deadline`. slot_bytes: per channel.
  // A rank that cannot tells the others through the store, and they fail
  // at once with kPeerLost and its reason.
  static std::unique_ptr<Segment> open(store::Store& store, int rank, int size,
                                       const uint32_t (&slot_bytes)[kChannels],
                                       std::chrono::steady_clock::time_point deadline);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  RankBlock& rank_block(int r) const {
    return reinterpret_cast<RankBlock*>(base_ + ranks_at_)[r];
  }
  Barrier& barrier(int channel) const {
    return reinterpret_cast<Barrier*>(base_ + barriers_at_)[channel];
  }
  // Rank r's staging slot of a channel: slot_bytes(channel) bytes.
  uint8_t* slot(int channel, int r) const {
    return base_ + slots_at_[channel] +
           static_cast<size_t>(r) * header().slot_bytes[channel];
  }
  size_t slot_bytes(int channel) const { return header().slot_bytes[channel]; }
  // Rank r's two boxes for broadcasts that do not meet, each
  // slot_bytes(channel) / 2 bytes: box(channel, r, i).
  uint8_t* box(int channel, int r, int i) const {
    return base_ + boxes_at_[channel] +
           static_cast<size_t>(r) * header().slot_bytes[channel] +
           static_cast<size_t>(i) * (header().slot_bytes[channel] / 2);
  }
  // The mailbox of messages from rank src to rank dst on a p2p channel.
  Mailbox& mailbox(int channel, int src, int dst) const {
    const size_t i = (static_cast<size_t>(channel) * static_cast<size_t>(size_) +
                      static_cast<size_t>(src)) * static_cast<size_t>(size_) +
                     static_cast<size_t>(dst);
    return reinterpret_cast<Mailbox*>(base_ + mail_at_)[i];
  }
  int size() const { return size_; }
  // Every rank may read every other one's memory (process_vm_readv): the
  // kernel allows it and no rank turned it off. The same on every rank.
  bool single_copy() const { return single_copy_; }
  bool single_copy_always() const { return header().single_copy_always != 0; }
  bool more_ranks_than_cores() const { return header().more_ranks_than_cores != 0; }

 private:
  Segment() = default;
  static std::unique_ptr<Segment> attach(store::Store& store, int rank, int size,
                                         const uint32_t (&slot_bytes)[kChannels],
                                         std::chrono::steady_clock::time_point deadline);
  void lay_out(int size, const uint32_t (&slot_bytes)[kChannels]);
  // Counts this rank in, and returns once every rank has attached; throws
  // when one cannot, or when they have not by the deadline.
  void await_everyone(store::Store& store, int rank, int pid0,
                      std::chrono::steady_clock::time_point deadline);
  // Rank 0: tells the others how attaching ended.
  void tell_outcome(AttachOutcome outcome, const std::string& why);
  // "ranks 3, 5 to attach to the shared segment": those that have not.
  Text not_attached() const;

  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  int size_ = 0;
  bool single_copy_ = false;
  size_t ranks_at_ = 0, barriers_at_ = 0, slots_at_[kChannels] = {},
         boxes_at_[kChannels] = {}, mail_at_ = 0;
};

}  // namespace gang::backends::shm_impl

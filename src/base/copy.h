// Copies of user buffers that stay fast for every pair of addresses.
//
// glibc's memcpy moves sizes from about 2 KiB to the last-level cache's
// size with `rep movsb`, and some x86 cores (AMD's, this machine's among
// them) run that many times slower when the destination lies 1 to 63
// bytes after the source modulo a 4 KiB page (docs/benchmarks.md, "Copies
// of user buffers"). It happens all the time here: staging slots are page
// aligned and large malloc'ed buffers start 16 bytes into a page. Such
// pairs are copied in 2 KiB pieces, which glibc moves with vector loads
// and stores; every other pair goes straight to memcpy/memmove.
#pragma once

#include <cstddef>

namespace gang::base {

// memcpy(dst, src, n): the buffers do not overlap.
void copy_bytes(void* dst, const void* src, size_t n) noexcept;

// memmove(dst, src, n): the buffers may overlap.
void move_bytes(void* dst, const void* src, size_t n) noexcept;

}  // namespace gang::base

// Stands in for a header Gloo's TCP transport includes but Debian's
// libgloo-dev (0.0~git20220518) does not install: gloo/transport/tcp/pair.h
// and context.h include gloo/common/memory.h, and the Gloo backend needs
// both to authenticate its pairs (gloo_pairs.cc). The build adds this folder
// to the include path only where the real header is missing.
//
// It declares the three pointer wrappers those headers use, each holding the
// one standard smart pointer the library was built with, so that the layout
// of the classes that embed them is the library's:
//   ShareableNonOwningPtr<T>  owns nothing: a shared_ptr with a deleter that
//                             does nothing, whose destructor waits until no
//                             NonOwningPtr made from it is left;
//   WeakNonOwningPtr<T>       a weak_ptr to one; true while it was ever set;
//   NonOwningPtr<T>           a shared_ptr locked from a weak one, for the
//                             time the object is used.
// gang's own code never uses them; gloo_pairs.cc checks at run time that the
// Pair it derives from sits where the library put it.
#pragma once

#include <memory>
#include <thread>

namespace gloo {

template <typename T>
class WeakNonOwningPtr;

template <typename T>
class ShareableNonOwningPtr final {
 public:
  explicit ShareableNonOwningPtr(T* object)
      : ptr_(object, [](T*) { /* owned elsewhere */ }) {}
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;
  ~ShareableNonOwningPtr() {
    std::weak_ptr<T> last_use = ptr_;
    ptr_.reset();
    while (!last_use.expired()) std::this_thread::yield();
  }

 protected:
  std::shared_ptr<T> ptr_;
  friend class WeakNonOwningPtr<T>;
};

template <typename T>
class NonOwningPtr;

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& from)
      : ptr_(from.ptr_) {}
  explicit operator bool() const noexcept {
    const std::weak_ptr<T> empty;
    return ptr_.owner_before(empty) || empty.owner_before(ptr_);
  }

 protected:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& from)
      : ptr_(from.ptr_.lock()) {}
  T* operator->() const noexcept { return ptr_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

}  // namespace gloo

// test_socket_owner.cc - which user owns the peer of a local TCP connection
// (src/store/socket_owner.cc), asked both ways (sock_diag and /proc/net),
// over IPv4, IPv6 and a dual-stack listener; a peer of another user (as
// root: a child that becomes nobody); a peer that has already closed.
// Compiled with the few sources it tests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include <cmocka.h>
}

#include <cerrno>
#include <cstring>
#include <string>

#include "store/socket_owner.h"

namespace {

using gang::store::peer_owner;
using gang::store::peer_owner_by_netlink;
using gang::store::peer_owner_by_proc;
using gang::store::SocketOwner;

constexpr uid_t kNobody = 65534;

// A listening socket on addr (port 0), or -1 when the family is missing.
int listen_on(int family, const char* addr, bool v6only) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  } else {
    const int flag = v6only ? 1 : 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &flag, sizeof flag);
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(fd, 8) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  assert_int_equal(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len),
                   0);
  return ss.ss_family == AF_INET
             ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
             : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

int connect_to(int family, const char* addr, int port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  }
  assert_int_equal(::connect(fd, reinterpret_cast<sockaddr*>(&ss), len), 0);
  return fd;
}

// Every way of asking says uid owns the peer of `accepted`.
void expect_owner(int accepted, uid_t uid) {
  const SocketOwner by_netlink = peer_owner_by_netlink(accepted);
  const SocketOwner by_proc = peer_owner_by_proc(accepted);
  const SocketOwner either = peer_owner(accepted);
  if (by_netlink.kind == SocketOwner::kUnknown) {
    // A kernel without sock_diag: /proc must do.
    print_message("sock_diag unavailable here: %s\n", by_netlink.why.c_str());
  } else {
    assert_int_equal(by_netlink.kind, SocketOwner::kFound);
    assert_int_equal(by_netlink.uid, uid);
  }
  assert_int_equal(by_proc.kind, SocketOwner::kFound);
  assert_int_equal(by_proc.uid, uid);
  assert_int_equal(either.kind, SocketOwner::kFound);
  assert_int_equal(either.uid, uid);
}

// A connection from this process to a listener on `server` (dialling
// `client`, of client_family), checked to be ours.
void own_connection(int family, const char* server, bool v6only,
                    int client_family, const char* client) {
  const int l = listen_on(family, server, v6only);
  if (l < 0) {
    print_message("no %s here; not checked\n", server);
    return;
  }
  const int c = connect_to(client_family, client, port_of(l));
  const int a = ::accept(l, nullptr, nullptr);
  assert_true(a >= 0);
  expect_owner(a, ::geteuid());
  ::close(a);
  ::close(c);
  ::close(l);
}

void test_ipv4(void**) {
  own_connection(AF_INET, "127.0.0.1", true, AF_INET, "127.0.0.1");
}

void test_ipv6(void**) {
  own_connection(AF_INET6, "::1", true, AF_INET6, "::1");
}

// A dual-stack listener sees an IPv4 client as ::ffff:127.0.0.1.
void test_dual_stack(void**) {
  own_connection(AF_INET6, "::", false, AF_INET, "127.0.0.1");
}

void test_other_user(void**) {
  if (::geteuid() != 0) {
    print_message("skipped: needs root, to become uid %u\n", kNobody);
    skip();
  }
  const int l = listen_on(AF_INET, "127.0.0.1", true);
  assert_true(l >= 0);
  const int port = port_of(l);
  int ready[2];
  int done[2];
  assert_int_equal(::pipe(ready), 0);
  assert_int_equal(::pipe(done), 0);
  const pid_t pid = ::fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    // The socket is made after the switch, so the kernel records nobody.
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) _exit(2);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      _exit(3);
    }
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) _exit(4);
    // Connected until the parent has looked.
    if (::read(done[0], &c, 1) < 0) _exit(5);
    _exit(0);
  }
  char c = 0;
  assert_int_equal(::read(ready[0], &c, 1), 1);
  const int a = ::accept(l, nullptr, nullptr);
  assert_true(a >= 0);
  expect_owner(a, kNobody);
  assert_int_equal(::write(done[1], &c, 1), 1);
  int status = 0;
  assert_int_equal(::waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(a);
  ::close(l);
  for (const int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

// A peer that closed at once leaves a socket the kernel reports as owned by
// uid 0 (or none at all): it must not pass for root's.
void test_closed_peer(void**) {
  const int l = listen_on(AF_INET, "127.0.0.1", true);
  assert_true(l >= 0);
  const int c = connect_to(AF_INET, "127.0.0.1", port_of(l));
  ::close(c);
  const int a = ::accept(l, nullptr, nullptr);
  assert_true(a >= 0);
  // The FIN has arrived once the accepted socket reads EOF.
  char byte;
  assert_int_equal(::recv(a, &byte, 1, 0), 0);
  for (const SocketOwner& o :
       {peer_owner_by_netlink(a), peer_owner_by_proc(a), peer_owner(a)}) {
    assert_int_not_equal(o.kind, SocketOwner::kFound);
  }
  ::close(a);
  ::close(l);
}

// Not a connection at all: unknown, with a reason.
void test_not_a_connection(void**) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  const SocketOwner o = peer_owner(fd);
  assert_int_equal(o.kind, SocketOwner::kUnknown);
  assert_false(o.why.empty());
  ::close(fd);
}

void test_user_name(void**) {
  assert_string_equal(gang::store::user_name(0).c_str(), "root (uid 0)");
  // A uid no one has is shown as a number.
  assert_string_equal(gang::store::user_name(4000000000U).c_str(),
                      "uid 4000000000");
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4),
      cmocka_unit_test(test_ipv6),
      cmocka_unit_test(test_dual_stack),
      cmocka_unit_test(test_other_user),
      cmocka_unit_test(test_closed_peer),
      cmocka_unit_test(test_not_a_connection),
      cmocka_unit_test(test_user_name),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

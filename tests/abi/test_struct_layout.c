/* test_struct_layout.c - the public structs, field by field: every offset and
 * every size as gang ships them on LP64 (x86-64, aarch64) and on i386
 * (ILP32, 8-byte integers 4-aligned), checked at compile time. The offsets
 * are those of the fields laid end to end, so a table that holds also
 * proves there is no implicit padding. A change to a public struct that is
 * not an append in 8-byte units breaks this file's build: that is an ABI
 * break, to be made deliberately (with the ABI baseline, tests/abi).
 *
 * Built and run natively (abi.struct_layout), and compiled with -m32 -fsyntax-only
 * (abi.struct_layout_32). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gang/gang.h>
#include <gang/gang_backend.h>

#if UINTPTR_MAX == 0xffffffffffffffffu
#define GANG_LAYOUT_LP64 1
#define GANG_LAYOUT_ILP32 0
#elif UINTPTR_MAX == 0xffffffffu && defined(__i386__)
#define GANG_LAYOUT_LP64 0
#define GANG_LAYOUT_ILP32 1
#else
#error "no layout table for this ABI"
#endif

#define FIELD(type, field, offset) \
  _Static_assert(offsetof(type, field) == (offset), #type "." #field " is not at " #offset)
#define SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof(" #type ") is not " #size)

#if GANG_LAYOUT_LP64
FIELD(gang_store_callbacks_t, struct_size, 0);
FIELD(gang_store_callbacks_t, ctx, 8);
FIELD(gang_store_callbacks_t, set, 16);
FIELD(gang_store_callbacks_t, get, 24);
FIELD(gang_store_callbacks_t, add, 32);
FIELD(gang_store_callbacks_t, remove, 40);
FIELD(gang_store_callbacks_t, check, 48);
FIELD(gang_store_callbacks_t, wait, 56);
FIELD(gang_store_callbacks_t, release, 64);
SIZE(gang_store_callbacks_t, 72);
FIELD(gang_options_t, struct_size, 0);
FIELD(gang_options_t, backend, 8);
FIELD(gang_options_t, device_type, 16);
FIELD(gang_options_t, device_index, 20);
FIELD(gang_options_t, rank, 24);
FIELD(gang_options_t, size, 28);
FIELD(gang_options_t, init_method, 32);
FIELD(gang_options_t, store, 40);
FIELD(gang_options_t, timeout_ms, 48);
FIELD(gang_options_t, name, 56);
FIELD(gang_options_t, debug, 64);
FIELD(gang_options_t, reserved0, 68);
SIZE(gang_options_t, 72);
FIELD(gang_parallel_config_t, struct_size, 0);
FIELD(gang_parallel_config_t, tp, 8);
FIELD(gang_parallel_config_t, cp, 12);
FIELD(gang_parallel_config_t, pp, 16);
FIELD(gang_parallel_config_t, dp, 20);
FIELD(gang_parallel_config_t, ep, 24);
FIELD(gang_parallel_config_t, sdp, 28);
FIELD(gang_parallel_config_t, reserved0, 32);
FIELD(gang_parallel_config_t, reserved1, 36);
FIELD(gang_parallel_config_t, order, 40);
SIZE(gang_parallel_config_t, 48);
FIELD(gang_env_t, struct_size, 0);
FIELD(gang_env_t, rank, 8);
FIELD(gang_env_t, size, 12);
FIELD(gang_env_t, local_rank, 16);
FIELD(gang_env_t, local_size, 20);
FIELD(gang_env_t, node_rank, 24);
FIELD(gang_env_t, num_nodes, 28);
FIELD(gang_env_t, master_port, 32);
FIELD(gang_env_t, reserved0, 36);
FIELD(gang_env_t, master_addr, 40);
FIELD(gang_env_t, source, 296);
SIZE(gang_env_t, 312);
FIELD(gang_backend_store_t, ctx, 0);
FIELD(gang_backend_store_t, set, 8);
FIELD(gang_backend_store_t, get, 16);
FIELD(gang_backend_store_t, add, 24);
FIELD(gang_backend_store_t, remove, 32);
SIZE(gang_backend_store_t, 40);
FIELD(gang_backend_config_t, struct_size, 0);
FIELD(gang_backend_config_t, rank, 8);
FIELD(gang_backend_config_t, size, 12);
FIELD(gang_backend_config_t, local_rank, 16);
FIELD(gang_backend_config_t, local_size, 20);
FIELD(gang_backend_config_t, device_type, 24);
FIELD(gang_backend_config_t, device_index, 28);
FIELD(gang_backend_config_t, timeout_ms, 32);
FIELD(gang_backend_config_t, host_id, 40);
FIELD(gang_backend_config_t, gang_name, 48);
FIELD(gang_backend_config_t, store, 56);
FIELD(gang_backend_config_t, parent, 64);
FIELD(gang_backend_config_t, color, 72);
FIELD(gang_backend_config_t, key, 76);
SIZE(gang_backend_config_t, 80);
FIELD(gang_backend_op_t, struct_size, 0);
FIELD(gang_backend_op_t, kind, 8);
FIELD(gang_backend_op_t, dtype, 12);
FIELD(gang_backend_op_t, op, 16);
FIELD(gang_backend_op_t, root, 20);
FIELD(gang_backend_op_t, tag, 24);
FIELD(gang_backend_op_t, channel, 28);
FIELD(gang_backend_op_t, send, 32);
FIELD(gang_backend_op_t, recv, 40);
FIELD(gang_backend_op_t, count, 48);
FIELD(gang_backend_op_t, send_counts, 56);
FIELD(gang_backend_op_t, recv_counts, 64);
FIELD(gang_backend_op_t, ncounts, 72);
FIELD(gang_backend_op_t, seq, 80);
FIELD(gang_backend_op_t, deadline_ns, 88);
FIELD(gang_backend_op_t, stream, 96);
FIELD(gang_backend_op_t, completion, 104);
FIELD(gang_backend_op_t, reserved, 108);
SIZE(gang_backend_op_t, 112);
FIELD(gang_backend_t, struct_size, 0);
FIELD(gang_backend_t, abi_version, 8);
FIELD(gang_backend_t, device_types, 12);
FIELD(gang_backend_t, name, 16);
FIELD(gang_backend_t, priority, 24);
FIELD(gang_backend_t, flags, 28);
FIELD(gang_backend_t, probe, 32);
FIELD(gang_backend_t, create, 40);
FIELD(gang_backend_t, destroy, 48);
FIELD(gang_backend_t, supports, 56);
FIELD(gang_backend_t, post, 64);
FIELD(gang_backend_t, test, 72);
FIELD(gang_backend_t, wait, 80);
FIELD(gang_backend_t, work_free, 88);
FIELD(gang_backend_t, poll_error, 96);
FIELD(gang_backend_t, finalize, 104);
FIELD(gang_backend_t, abort, 112);
FIELD(gang_backend_t, split, 120);
FIELD(gang_backend_t, device_index, 128);
FIELD(gang_backend_t, shrink, 136);
SIZE(gang_backend_t, 144);
#endif
#if GANG_LAYOUT_ILP32
FIELD(gang_store_callbacks_t, struct_size, 0);
FIELD(gang_store_callbacks_t, ctx, 4);
FIELD(gang_store_callbacks_t, set, 8);
FIELD(gang_store_callbacks_t, get, 12);
FIELD(gang_store_callbacks_t, add, 16);
FIELD(gang_store_callbacks_t, remove, 20);
FIELD(gang_store_callbacks_t, check, 24);
FIELD(gang_store_callbacks_t, wait, 28);
FIELD(gang_store_callbacks_t, release, 32);
SIZE(gang_store_callbacks_t, 36);
FIELD(gang_options_t, struct_size, 0);
FIELD(gang_options_t, backend, 4);
FIELD(gang_options_t, device_type, 8);
FIELD(gang_options_t, device_index, 12);
FIELD(gang_options_t, rank, 16);
FIELD(gang_options_t, size, 20);
FIELD(gang_options_t, init_method, 24);
FIELD(gang_options_t, store, 28);
FIELD(gang_options_t, timeout_ms, 32);
FIELD(gang_options_t, name, 40);
FIELD(gang_options_t, debug, 44);
FIELD(gang_options_t, reserved0, 48);
SIZE(gang_options_t, 52);
FIELD(gang_parallel_config_t, struct_size, 0);
FIELD(gang_parallel_config_t, tp, 4);
FIELD(gang_parallel_config_t, cp, 8);
FIELD(gang_parallel_config_t, pp, 12);
FIELD(gang_parallel_config_t, dp, 16);
FIELD(gang_parallel_config_t, ep, 20);
FIELD(gang_parallel_config_t, sdp, 24);
FIELD(gang_parallel_config_t, reserved0, 28);
FIELD(gang_parallel_config_t, reserved1, 32);
FIELD(gang_parallel_config_t, order, 36);
SIZE(gang_parallel_config_t, 40);
FIELD(gang_env_t, struct_size, 0);
FIELD(gang_env_t, rank, 4);
FIELD(gang_env_t, size, 8);
FIELD(gang_env_t, local_rank, 12);
FIELD(gang_env_t, local_size, 16);
FIELD(gang_env_t, node_rank, 20);
FIELD(gang_env_t, num_nodes, 24);
FIELD(gang_env_t, master_port, 28);
FIELD(gang_env_t, reserved0, 32);
FIELD(gang_env_t, master_addr, 36);
FIELD(gang_env_t, source, 292);
SIZE(gang_env_t, 308);
FIELD(gang_backend_store_t, ctx, 0);
FIELD(gang_backend_store_t, set, 4);
FIELD(gang_backend_store_t, get, 8);
FIELD(gang_backend_store_t, add, 12);
FIELD(gang_backend_store_t, remove, 16);
SIZE(gang_backend_store_t, 20);
FIELD(gang_backend_config_t, struct_size, 0);
FIELD(gang_backend_config_t, rank, 4);
FIELD(gang_backend_config_t, size, 8);
FIELD(gang_backend_config_t, local_rank, 12);
FIELD(gang_backend_config_t, local_size, 16);
FIELD(gang_backend_config_t, device_type, 20);
FIELD(gang_backend_config_t, device_index, 24);
FIELD(gang_backend_config_t, timeout_ms, 28);
FIELD(gang_backend_config_t, host_id, 36);
FIELD(gang_backend_config_t, gang_name, 40);
FIELD(gang_backend_config_t, store, 44);
FIELD(gang_backend_config_t, parent, 48);
FIELD(gang_backend_config_t, color, 52);
FIELD(gang_backend_config_t, key, 56);
SIZE(gang_backend_config_t, 60);
FIELD(gang_backend_op_t, struct_size, 0);
FIELD(gang_backend_op_t, kind, 4);
FIELD(gang_backend_op_t, dtype, 8);
FIELD(gang_backend_op_t, op, 12);
FIELD(gang_backend_op_t, root, 16);
FIELD(gang_backend_op_t, tag, 20);
FIELD(gang_backend_op_t, channel, 24);
FIELD(gang_backend_op_t, send, 28);
FIELD(gang_backend_op_t, recv, 32);
FIELD(gang_backend_op_t, count, 36);
FIELD(gang_backend_op_t, send_counts, 40);
FIELD(gang_backend_op_t, recv_counts, 44);
FIELD(gang_backend_op_t, ncounts, 48);
FIELD(gang_backend_op_t, seq, 52);
FIELD(gang_backend_op_t, deadline_ns, 60);
FIELD(gang_backend_op_t, stream, 68);
FIELD(gang_backend_op_t, completion, 72);
FIELD(gang_backend_op_t, reserved, 76);
SIZE(gang_backend_op_t, 80);
FIELD(gang_backend_t, struct_size, 0);
FIELD(gang_backend_t, abi_version, 4);
FIELD(gang_backend_t, device_types, 8);
FIELD(gang_backend_t, name, 12);
FIELD(gang_backend_t, priority, 16);
FIELD(gang_backend_t, flags, 20);
FIELD(gang_backend_t, probe, 24);
FIELD(gang_backend_t, create, 28);
FIELD(gang_backend_t, destroy, 32);
FIELD(gang_backend_t, supports, 36);
FIELD(gang_backend_t, post, 40);
FIELD(gang_backend_t, test, 44);
FIELD(gang_backend_t, wait, 48);
FIELD(gang_backend_t, work_free, 52);
FIELD(gang_backend_t, poll_error, 56);
FIELD(gang_backend_t, finalize, 60);
FIELD(gang_backend_t, abort, 64);
FIELD(gang_backend_t, split, 68);
FIELD(gang_backend_t, device_index, 72);
FIELD(gang_backend_t, shrink, 76);
SIZE(gang_backend_t, 80);
#endif

int main(void) {
  printf("ok: the public structs have the %s layout gang ships\n",
         GANG_LAYOUT_LP64 ? "LP64" : "i386");
  return 0;
}

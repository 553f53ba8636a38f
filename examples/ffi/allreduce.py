# A 2-rank all-reduce through libgang's C ABI from Python's ctypes (no
# bindings): run under gangrun, e.g.
#   build/gangrun --nproc-per-node 2 -- python3 examples/ffi/allreduce.py build/libgang.so.0
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libgang.so.0")
lib.gang_last_error.restype = ctypes.c_char_p
lib.gang_options_init_v.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
lib.gang_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
lib.gang_rank.argtypes = lib.gang_size.argtypes = lib.gang_destroy.argtypes = [ctypes.c_void_p]
lib.gang_all_reduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
GANG_FLOAT32, GANG_SUM = 8, 0
OPTIONS_SIZE = 72  # sizeof(gang_options_t) on LP64; init fills the defaults


def check(status, what):
    if status != 0:
        sys.exit(f"{what}: status {status}: {lib.gang_last_error().decode()}")


options = ctypes.create_string_buffer(OPTIONS_SIZE)
lib.gang_options_init_v(options, OPTIONS_SIZE)
g = ctypes.c_void_p()
check(lib.gang_create(options, ctypes.byref(g)), "gang_create")
rank, size = lib.gang_rank(g), lib.gang_size(g)
x = (ctypes.c_float * 4)(*([rank + 1.0] * 4))
y = (ctypes.c_float * 4)()
check(lib.gang_all_reduce(g, x, y, 4, GANG_FLOAT32, GANG_SUM, None), "gang_all_reduce")
want = size * (size + 1) / 2
if list(y) != [want] * 4:
    sys.exit(f"rank {rank}: got {list(y)}, want {want}")
print(f"python ctypes: rank {rank} of {size}: sum {y[0]:g}")
check(lib.gang_destroy(g), "gang_destroy")

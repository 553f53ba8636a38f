-- A 2-rank all-reduce through libgang's C ABI from LuaJIT's FFI: run under
-- gangrun, e.g.
--   build/gangrun --nproc-per-node 2 -- luajit examples/ffi/allreduce.lua build/libgang.so.0
local ffi = require("ffi")
ffi.cdef [[
typedef struct gang_s gang_t;
void gang_options_init_v(void* options, size_t struct_size);
int gang_create(const void* options, gang_t** out);
int gang_rank(const gang_t* g);
int gang_size(const gang_t* g);
int gang_all_reduce(gang_t* g, const void* send, void* recv, size_t count,
                    int dtype, int op, void** work);
int gang_destroy(gang_t* g);
const char* gang_last_error(void);
]]
local lib = ffi.load(arg[1] or "libgang.so.0")
local GANG_FLOAT32, GANG_SUM = 8, 0
local OPTIONS_SIZE = 72 -- sizeof(gang_options_t) on LP64

local function check(status, what)
  if status ~= 0 then
    io.stderr:write(what, ": status ", status, ": ", ffi.string(lib.gang_last_error()), "\n")
    os.exit(1)
  end
end

local options = ffi.new("uint8_t[?]", OPTIONS_SIZE)
lib.gang_options_init_v(options, OPTIONS_SIZE)
local g = ffi.new("gang_t*[1]")
check(lib.gang_create(options, g), "gang_create")
local rank, size = lib.gang_rank(g[0]), lib.gang_size(g[0])
local x, y = ffi.new("float[4]"), ffi.new("float[4]")
for i = 0, 3 do x[i] = rank + 1 end
check(lib.gang_all_reduce(g[0], x, y, 4, GANG_FLOAT32, GANG_SUM, nil), "gang_all_reduce")
local want = size * (size + 1) / 2
for i = 0, 3 do
  if y[i] ~= want then
    io.stderr:write("rank ", rank, ": got ", y[i], ", want ", want, "\n")
    os.exit(1)
  end
end
print(string.format("luajit ffi: rank %d of %d: sum %g", rank, size, y[0]))
check(lib.gang_destroy(g[0]), "gang_destroy")

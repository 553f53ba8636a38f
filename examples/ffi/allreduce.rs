// A 2-rank all-reduce through libgang's C ABI from Rust, std only: built
// and run under gangrun, e.g.
//   rustc -L build examples/ffi/allreduce.rs -o /tmp/allreduce
//   LD_LIBRARY_PATH=build build/gangrun --nproc-per-node 2 -- /tmp/allreduce
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

#[repr(C)]
struct Gang {
    _opaque: [u8; 0],
}

#[link(name = "gang")]
extern "C" {
    fn gang_options_init_v(options: *mut u8, struct_size: usize);
    fn gang_create(options: *const u8, out: *mut *mut Gang) -> c_int;
    fn gang_rank(g: *const Gang) -> c_int;
    fn gang_size(g: *const Gang) -> c_int;
    fn gang_all_reduce(g: *mut Gang, send: *const c_void, recv: *mut c_void, count: usize,
                       dtype: c_int, op: c_int, work: *mut *mut c_void) -> c_int;
    fn gang_destroy(g: *mut Gang) -> c_int;
    fn gang_last_error() -> *const c_char;
}

const GANG_FLOAT32: c_int = 8;
const GANG_SUM: c_int = 0;
const OPTIONS_SIZE: usize = 72; // sizeof(gang_options_t) on LP64

fn check(status: c_int, what: &str) {
    if status != 0 {
        let msg = unsafe { CStr::from_ptr(gang_last_error()) }.to_string_lossy();
        eprintln!("{}: status {}: {}", what, status, msg);
        std::process::exit(1);
    }
}

fn main() {
    let mut options = [0u8; OPTIONS_SIZE];
    let mut g: *mut Gang = std::ptr::null_mut();
    unsafe {
        gang_options_init_v(options.as_mut_ptr(), OPTIONS_SIZE);
        check(gang_create(options.as_ptr(), &mut g), "gang_create");
    }
    let (rank, size) = unsafe { (gang_rank(g), gang_size(g)) };
    let x = [(rank + 1) as f32; 4];
    let mut y = [0f32; 4];
    unsafe {
        check(gang_all_reduce(g, x.as_ptr() as *const c_void, y.as_mut_ptr() as *mut c_void, 4,
                              GANG_FLOAT32, GANG_SUM, std::ptr::null_mut()),
              "gang_all_reduce");
    }
    let want = (size * (size + 1) / 2) as f32;
    if y.iter().any(|&v| v != want) {
        eprintln!("rank {}: got {:?}, want {}", rank, y, want);
        std::process::exit(1);
    }
    println!("rust: rank {} of {}: sum {}", rank, size, y[0]);
    unsafe { check(gang_destroy(g), "gang_destroy") };
}

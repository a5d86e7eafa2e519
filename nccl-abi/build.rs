//! The library answers to NCCL's soname, so that a program linked against NCCL
//! (`DT_NEEDED libnccl.so.2`) loads it from `LD_LIBRARY_PATH`.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
}

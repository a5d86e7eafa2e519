//! ferroccl's device library for other runtimes: the C header of device-rt's C surface
//! (`device_rt::cabi`), generated from the Rust definitions; the library in the forms
//! consumers link (PTX, relocatable cubin, nvcc archive); and the offline link of a user's
//! device code with it (docs/linker.md).

mod error;
pub mod header;
pub mod library;
pub mod link;
pub mod signature;
pub mod toolchain;

pub use error::Error;

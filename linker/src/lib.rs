//! ferroccl's device library for other runtimes: the C header of device-rt's C surface
//! (`device_rt::cabi`), generated from the Rust definitions.

pub mod header;
pub mod signature;

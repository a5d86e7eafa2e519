//! The C header of device-rt's C surface, generated from the Rust definitions with
//! cbindgen (macros expanded by the nightly compiler, so the functions the surface's
//! macros declare are seen as the compiler sees them).

use std::path::Path;

use cbindgen::{Builder, Config, EnumConfig, ExportConfig, FunctionConfig, ItemType, Language, ParseConfig, ParseExpandConfig, RenameRule, Style};
use host_shim::device_rt::abi::MAX_PES;

/// The header, from the device-rt crate at `device_rt`.
pub fn generate(device_rt: &Path) -> Result<String, cbindgen::Error> {
    let mut export = ExportConfig {
        // The functions and what they name; device-rt's other public constants, its
        // self-test types and the collective matmul's lanes (which its constant `LANES`
        // would pull in) are not the surface's.
        item_types: vec![ItemType::Functions, ItemType::Enums, ItemType::Structs, ItemType::Typedefs],
        exclude: vec!["PublishMode".into(), "Lane".into()],
        ..ExportConfig::default()
    };
    for (rust, c) in [("ShmemHandle", "ferroccl_heap"), ("Status", "ferroccl_status"), ("F16", "ferroccl_half"), ("Bf16", "ferroccl_bfloat16"), ("MAX_PES", "FERROCCL_MAX_PES")] {
        export.rename.insert(rust.into(), c.into());
    }
    let config = Config {
        language: Language::C,
        include_guard: Some("FERROCCL_DEVICE_H".into()),
        autogen_warning: Some("/* Generated from device-rt's Rust definitions by `ferroccl-link header`: do not edit. */".into()),
        sys_includes: vec!["stddef.h".into(), "stdint.h".into()],
        no_includes: true,
        after_includes: Some(format!(
            "\n/** Most PEs one symmetric heap may join (device-rt's `abi::MAX_PES`). */\n#define FERROCCL_MAX_PES {MAX_PES}\n\n\
             /** The surface's functions are device functions: `__device__` under CUDA C++. */\n\
             #ifdef __CUDACC__\n#define FERROCCL_DEVICE __device__\n#else\n#define FERROCCL_DEVICE\n#endif"
        )),
        style: Style::Type,
        cpp_compat: true,
        usize_is_size_t: true,
        function: FunctionConfig { prefix: Some("FERROCCL_DEVICE".into()), ..FunctionConfig::default() },
        export,
        enumeration: EnumConfig { rename_variants: RenameRule::ScreamingSnakeCase, prefix_with_name: true, ..EnumConfig::default() },
        parse: ParseConfig { expand: ParseExpandConfig { crates: vec!["device-rt".into()], features: Some(vec!["host-emu".into()]), ..ParseExpandConfig::default() }, ..ParseConfig::default() },
        ..Config::default()
    };
    let bindings = Builder::new().with_crate(device_rt).with_config(config).generate()?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    Ok(String::from_utf8(out).expect("cbindgen writes UTF-8"))
}

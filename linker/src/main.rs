//! `ferroccl-link`: ferroccl's device library in the forms other runtimes link.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ferroccl_linker::toolchain::Toolchain;
use ferroccl_linker::{library, link};

#[derive(Parser)]
#[command(about = "ferroccl's device library for other runtimes' kernels")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the C header of the device surface (generated from device-rt's Rust definitions)
    Header {
        /// Where to write it (standard output when absent)
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Writes the library's forms into a directory: the PTX, a relocatable cubin, the
    /// archive `libferroccl_device.a` for `nvcc -rdc=true ... -lferroccl_device`, the header
    Lib {
        /// The directory (created if missing)
        #[arg(long)]
        out: PathBuf,
        /// The architecture of the cubin and the archive
        #[arg(long, default_value = "sm_90a")]
        arch: String,
    },
    /// Writes the device module this build embeds (PTX and cubins) into a directory, for
    /// crates built where the module cannot be (a stable toolchain): build them with
    /// FERROCCL_PREBUILT_MODULE=DIR
    Module {
        /// The directory (created if missing)
        #[arg(long)]
        out: PathBuf,
    },
    /// Links device code (relocatable cubins, `nvcc -dc` objects, PTX) into one loadable
    /// cubin, offline; give ferroccl's library among the inputs
    Link {
        /// The linked cubin
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// The inputs
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    // cbindgen reports device-rt's same-named private constants, which the header
    // leaves out, as errors: quiet unless RUST_LOG asks.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,cbindgen=off")).init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Lib { out, arch } => Toolchain::find().and_then(|tools| library::build(&tools, &out, &arch)).map(|lib| println!("{}", lib.archive.display())).map_err(|e| e.to_string()),
        Command::Module { out } => library::write_module(&out).map(|files| files.iter().for_each(|f| println!("{}", f.display()))).map_err(|e| e.to_string()),
        Command::Link { out, arch, inputs } => Toolchain::find().and_then(|tools| link::link(&tools, &arch, &inputs, &out)).map_err(|e| e.to_string()),
        Command::Header { out } => {
            let device_rt = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../device-rt");
            ferroccl_linker::header::generate(&device_rt).map_err(|e| e.to_string()).and_then(|text| match out {
                Some(path) => std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display())),
                None => {
                    print!("{text}");
                    Ok(())
                }
            })
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("ferroccl-link: {why}");
            ExitCode::FAILURE
        }
    }
}

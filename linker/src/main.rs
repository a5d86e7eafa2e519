//! `ferroccl-link`: ferroccl's device library in the forms other runtimes link.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    // cbindgen reports device-rt's same-named private constants, which the header
    // leaves out, as errors: quiet unless RUST_LOG asks.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,cbindgen=off")).init();
    let cli = Cli::parse();
    let outcome = match cli.command {
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

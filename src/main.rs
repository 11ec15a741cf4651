//! The `toold` binary: parses the command line and hands over to [`toold::cli`].

fn main() -> std::process::ExitCode {
    toold::cli::main()
}

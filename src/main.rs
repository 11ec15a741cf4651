//! The `toold` binary: parses the command line and hands over to [`toold::cli`].
//!
//! It allocates with mimalloc: under load glibc's malloc spent a fifth of the runtime's time
//! in allocation, partly waiting on its arena locks between threads. The `system-allocator`
//! feature leaves it out, for heap profilers that wrap malloc (heaptrack).

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toold::cli::main()
}

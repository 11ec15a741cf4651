//! Dispatcher behaviour through the library's public API: scheduling, the pipeline's phases,
//! and provider formats against golden files. One test binary keeps link time down.

mod formats;
mod harness;
mod hook_asks;
mod phases;
mod robustness;
mod scheduling;
mod streaming;

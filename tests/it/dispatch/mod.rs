//! Dispatcher behaviour through the library's public API: scheduling, the pipeline's phases,
//! and provider formats against golden files.

mod formats;
mod harness;
mod hook_asks;
mod phases;
mod robustness;
mod scheduling;
mod streaming;

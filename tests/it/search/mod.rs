//! The search tools (`glob_search`, `grep_search`) through the library's public API: output
//! compared with the real `rg` binary, behaviour and bad input, and path escapes through a real
//! dispatcher.

mod behaviour;
mod fixture;
mod harness;
mod path_escape;
mod rg_compat;

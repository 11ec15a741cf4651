//! The shell tools (`bash`, `bash_output`, `kill_shell`) with real processes, through a
//! dispatcher so that validation, permission, context updates, offload and sibling abort are
//! the real ones.

mod background;
mod behaviour;
mod harness;
mod processes;
mod sandbox;

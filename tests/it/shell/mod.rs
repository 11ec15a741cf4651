//! The shell tools (`bash`, `bash_output`, `write_stdin`, `kill_shell`) with real processes, through a
//! dispatcher so that validation, permission, context updates, offload and sibling abort are
//! the real ones.

mod background;
mod behaviour;
mod harness;
mod interactive;
mod limits;
mod processes;
mod sandbox;
mod session_sandbox;
mod spare;
mod spawner_binary;

//! The file tools (`read_file`, `write_file`, `edit_file`, `notebook_edit`,
//! `str_replace_based_edit_tool`) through a real dispatcher: behaviour and bad input per tool,
//! the golden edit suite run against both edit tools, notebook golden files, and the
//! path-escape suite.

mod edit_golden;
mod escape;
mod flags;
mod harness;
mod notebook;
mod read;
mod text_editor;
mod write;

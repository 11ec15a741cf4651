//! The session and utility tools (`web_fetch`, `todo_write`, `tool_search`, `sleep`,
//! `read_result`, `send_user_message`, `structured_output`, `skill`, `config`) through the
//! library's public API: detached execution and a real dispatcher.

mod harness;
mod http_server;
mod readme;
mod registration;
mod session_tools;
mod settings_file;
mod skill;
mod utility_tools;
mod web_fetch;

//! `/metrics` after a varied run against the real daemon: the text passes
//! `promtool check metrics` and each DESIGN §9 series has the value the run implies.

mod exposition;
mod varied_run;
mod workspace;

//! The `/ui` dashboard: its files as served (content types, the Content-Security-Policy,
//! nothing from elsewhere), what it added to the API (`endpoints`), and the page in a real
//! browser against the real daemon (`browser`, through `webdriver`), and what its figures
//! mean at 800 px (`figures`: whole approval inputs, latency without approval waits, colours,
//! unknown tools, the chart), and an environment session's image, tier and limits in the
//! sessions table (`environment_columns`).

mod assets;
mod audit;
pub(crate) mod browser;
mod endpoints;
mod environment_columns;
mod figures;
pub(crate) mod webdriver;

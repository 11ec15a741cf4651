//! The `/ui` dashboard: its files as served (content types, the Content-Security-Policy,
//! nothing from elsewhere), the one endpoint it added (`GET /v1/approvals`), and the page in
//! a real browser against the real daemon (`browser`, through `webdriver`).

mod assets;
mod browser;
mod webdriver;

//! Renderers: the only places that turn diagnostics into text.

pub mod human;
pub mod json;

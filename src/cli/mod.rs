//! HTTP client commands.

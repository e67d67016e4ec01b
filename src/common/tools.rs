//! The names of loom's own tools and the page limit of `loom_read`, which layers below the
//! gateway (the firewall's reductions, the session report) quote.

pub const QUERY: &str = "loom_query";
pub const LIST: &str = "loom_list_datasets";
pub const DESCRIBE: &str = "loom_describe";
pub const MATERIALIZE: &str = "loom_materialize";
pub const EXPORT: &str = "loom_export";
pub const READ: &str = "loom_read";

/// The most one `loom_read` call returns, in characters.
pub const MAX_PAGE_CHARS: usize = 100_000;

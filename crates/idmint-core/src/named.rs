//! A built-in [`Layout`] from its name, as `str::parse` (the registry is `layout.rs`).

use crate::{Error, Layout};

/// The built-in layout of that name: `"snowflake".parse::<Layout>()` is
/// [`Layout::builtin`]`("snowflake")`.
///
/// # Example
///
/// ```
/// use idmint_core::Layout;
///
/// let layout: Layout = "sonyflake".parse()?;
/// assert_eq!(layout.name(), "sonyflake");
/// assert!("nope".parse::<Layout>().is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
impl std::str::FromStr for Layout {
    type Err = Error;

    fn from_str(name: &str) -> Result<Layout, Error> {
        Layout::builtin(name)
    }
}

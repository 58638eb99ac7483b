//! The lifetime rule of a layout, one place for every edge that warns: a layout that has run
//! out, runs out within 10 years, or starts in the future ([`Capacity::warnings`]), and how
//! long a span is in words ([`Capacity::span`]).

use crate::kind::Capacity;

/// How close a layout's end may come before it is warned about: 10 years of 365.25 days.
const WARN_WITHIN_MS: u64 = 10 * YEAR_MS;
/// One year of 365.25 days, in milliseconds.
const YEAR_MS: u64 = 31_557_600_000;
/// One day, in milliseconds.
const DAY_MS: u64 = 86_400_000;

impl Capacity {
    /// The warnings about the lifetime of the layout named `name` at `now_ms` (Unix ms): it
    /// ran out, it runs out within 10 years, or it starts in the future. Empty for a layout
    /// with years to go and for one that wraps.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// let capacity = Layout::builtin("snowflake").unwrap().capacity();
    /// assert!(capacity.warnings("snowflake", 1_700_000_000_000).is_empty());
    /// let end = capacity.end_ms.unwrap();
    /// let soon = capacity.warnings("snowflake", end - 86_400_000 * 3);
    /// assert_eq!(soon.len(), 1);
    /// assert!(soon[0].contains("runs out on") && soon[0].contains("3 days"), "{soon:?}");
    /// assert!(capacity.warnings("snowflake", end)[0].contains("ran out on"));
    /// ```
    pub fn warnings(&self, name: &str, now_ms: u64) -> Vec<String> {
        let mut warnings = Vec::new();
        if let (Some(end_ms), Some(end)) = (self.end_ms, &self.end) {
            if end_ms <= now_ms {
                warnings.push(format!(
                    "layout `{name}` ran out on {end}, {} ago: it cannot issue ids any more",
                    Capacity::span(now_ms - end_ms)
                ));
            } else if end_ms - now_ms <= WARN_WITHIN_MS {
                warnings.push(format!(
                    "layout `{name}` runs out on {end}, in {}: less than 10 years from now",
                    Capacity::span(end_ms - now_ms)
                ));
            }
        }
        if let (Some(start_ms), Some(start)) = (self.start_ms, &self.start)
            && start_ms > now_ms
        {
            warnings.push(format!(
                "layout `{name}` starts on {start}, in {}: it cannot issue ids before then",
                Capacity::span(start_ms - now_ms)
            ));
        }
        warnings
    }

    /// A span of `ms` milliseconds in words: years (to a tenth) from two years on, then days,
    /// hours, or seconds.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Capacity;
    ///
    /// assert_eq!(Capacity::span(3 * 86_400_000), "3 days");
    /// assert_eq!(Capacity::span(90_000), "90 s");
    /// ```
    pub fn span(ms: u64) -> String {
        if ms >= 2 * YEAR_MS {
            format!("{:.1} years", ms as f64 / YEAR_MS as f64)
        } else if ms >= 2 * DAY_MS {
            format!("{} days", ms / DAY_MS)
        } else if ms >= 2 * 3_600_000 {
            format!("{} hours", ms / 3_600_000)
        } else {
            format!("{} s", ms / 1000)
        }
    }
}

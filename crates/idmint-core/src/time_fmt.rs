//! RFC 3339 rendering and parsing of Unix milliseconds, without a date-time dependency.
//!
//! Only what ID layouts need: UTC output with millisecond precision, and input in UTC (`Z`) or
//! with a numeric offset. The calendar arithmetic is the proleptic Gregorian day count.

/// Renders Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
///
/// # Example
///
/// ```
/// assert_eq!(idmint_core::format_rfc3339_ms(1_288_834_974_657), "2010-11-04T01:42:54.657Z");
/// ```
pub fn format_rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Parses RFC 3339 text (`2024-01-01T00:00:00Z`, optional fraction, `Z` or `±HH:MM`) into Unix
/// milliseconds. Times before 1970 are refused.
///
/// # Errors
///
/// A message saying what is wrong with the text.
///
/// # Example
///
/// ```
/// assert_eq!(idmint_core::parse_rfc3339_ms("2014-09-01T00:00:00Z"), Ok(1_409_529_600_000));
/// assert!(idmint_core::parse_rfc3339_ms("2014-09-01").is_err());
/// ```
pub fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let b = text.as_bytes();
    let expect = "expected YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)";
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(expect.into());
    }
    if b[13] != b':' || b[16] != b':' {
        return Err(expect.into());
    }
    // Bytes, not `&text[range]`: a multi-byte character may straddle the range's end.
    let num = |range: std::ops::Range<usize>| -> Result<u64, String> {
        let part = &b[range];
        if part.iter().all(u8::is_ascii_digit) {
            Ok(part.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
        } else {
            Err(expect.into())
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(format!("no such date {year:04}-{month:02}-{day:02}"));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("no such time {hour:02}:{minute:02}:{second:02}"));
    }
    let mut i = 19;
    let mut millis = 0;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(expect.into());
        }
        // Keep milliseconds; finer digits are truncated.
        let digits = &text[start..i.min(start + 3)];
        millis = digits.parse::<u64>().map_err(|_| expect.to_string())?
            * 10u64.pow(3 - digits.len() as u32);
    }
    let offset_secs: i64 = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err(expect.into());
            }
            let h = i64::from(h1 - b'0') * 10 + i64::from(h2 - b'0');
            let m = i64::from(m1 - b'0') * 10 + i64::from(m2 - b'0');
            if h > 23 || m > 59 {
                return Err("offset out of range".into());
            }
            let s = (h * 60 + m) * 60;
            if *sign == b'+' { s } else { -s }
        }
        _ => return Err(expect.into()),
    };
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let secs = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_secs;
    if secs < 0 {
        return Err("times before 1970-01-01T00:00:00Z are not supported".into());
    }
    Ok(secs as u64 * 1000 + millis)
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_instants() {
        let check = |ms: u64, text: &str| {
            assert_eq!(format_rfc3339_ms(ms), text);
            assert_eq!(parse_rfc3339_ms(text), Ok(ms));
        };
        check(0, "1970-01-01T00:00:00.000Z");
        check(1_288_834_974_657, "2010-11-04T01:42:54.657Z");
        check(1_455_788_600_316, "2016-02-18T09:43:20.316Z");
        check(4_398_046_511_103, "2109-05-15T07:35:11.103Z");
        check(951_782_400_000, "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn offsets_and_refusals() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00.5Z"), Ok(500));
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2023-01-01T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "2023-01-01T00:00:00",
            "2023-01-01T00:00:00+1:00",
            "+023-01-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad} was accepted");
        }
    }

    proptest! {
        #[test]
        fn round_trip(ms in 0u64..=253_402_300_799_999) {
            prop_assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Ok(ms));
        }

        #[test]
        fn parse_never_panics(text in ".{0,40}") {
            let _ = parse_rfc3339_ms(&text);
        }
    }
}

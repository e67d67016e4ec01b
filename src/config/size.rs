//! Byte sizes written as strings, e.g. `"512MB"`, `"2 GiB"`, `"1.5GB"`.
//!
//! Decimal units are powers of 1000 and binary units powers of 1024, as their names say; the
//! unit is case-insensitive because people write `512mb` and `512Mb` and mean the same thing.

pub(crate) const KIB: u64 = 1024;
pub(crate) const MIB: u64 = 1024 * KIB;
pub(crate) const GIB: u64 = 1024 * MIB;
pub(crate) const TIB: u64 = 1024 * GIB;

const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", KIB),
    ("mib", MIB),
    ("gib", GIB),
    ("tib", TIB),
];

pub(crate) const UNIT_LIST: &str = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB";

/// More fraction digits than this cannot change the result by a whole byte at TB scale.
const MAX_FRACTION_DIGITS: usize = 12;

/// Parses a size string into bytes, rounding a fractional result down. A bare number means bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let number_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, rest) = t.split_at(number_end);
    let unit = rest.trim_start();
    let example =
        "expected a whole or decimal number followed by a unit, like \"512MB\" or \"2GiB\"";
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int_part.is_empty() || frac_part.contains('.') || number.ends_with('.') {
        return Err(format!("cannot read {} as a size: {example}", quote(text)));
    }
    let Some(&(_, multiplier)) = UNITS
        .iter()
        .find(|(name, _)| unit.is_empty() || name.eq_ignore_ascii_case(unit))
    else {
        return Err(format!(
            "cannot read {} as a size: unknown unit `{unit}`; use {UNIT_LIST}",
            quote(text)
        ));
    };
    let frac_part = &frac_part[..frac_part.len().min(MAX_FRACTION_DIGITS)];
    let too_large = || {
        format!(
            "{} is too large (the limit is {} bytes)",
            quote(text),
            u64::MAX
        )
    };
    // u128 holds any u64 times 10^12 times 2^40 without overflow; the checks guard the rest.
    let int: u128 = int_part.parse().map_err(|_| too_large())?;
    let frac: u128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().map_err(|_| too_large())?
    };
    let scale = 10u128.pow(u32::try_from(frac_part.len()).unwrap_or(0));
    let bytes = int
        .checked_mul(scale)
        .and_then(|v| v.checked_add(frac))
        .and_then(|v| v.checked_mul(u128::from(multiplier)))
        .map(|v| v / scale)
        .ok_or_else(too_large)?;
    u64::try_from(bytes).map_err(|_| too_large())
}

fn quote(text: &str) -> String {
    super::json::json_quote(text)
}

/// A byte count for people: the unit (binary or decimal) that divides it exactly with the smallest
/// quotient, so `512MB` shows as "512 MB" and `256MiB` as "256 MiB"; else the raw number.
pub(crate) fn human_bytes(bytes: u64) -> String {
    let units = [
        ("TiB", TIB),
        ("TB", 1_000_000_000_000),
        ("GiB", GIB),
        ("GB", 1_000_000_000),
        ("MiB", MIB),
        ("MB", 1_000_000),
        ("KiB", KIB),
        ("KB", 1_000),
    ];
    units
        .iter()
        .filter(|(_, size)| bytes >= *size && bytes.is_multiple_of(*size))
        .min_by_key(|(_, size)| bytes / size)
        .map_or_else(
            || format!("{bytes} bytes"),
            |(unit, size)| format!("{} {unit}", bytes / size),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_binary_units() {
        assert_eq!(parse_size("512MB").unwrap(), 512_000_000);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("2GiB").unwrap(), 2 * GIB);
        assert_eq!(parse_size("300MiB").unwrap(), 300 * MIB);
        assert_eq!(parse_size("1024KB").unwrap(), 1_024_000);
        assert_eq!(parse_size("1TB").unwrap(), 1_000_000_000_000);
        assert_eq!(parse_size("3KiB").unwrap(), 3 * KIB);
        assert_eq!(parse_size("7B").unwrap(), 7);
    }

    #[test]
    fn unit_is_case_insensitive_and_may_follow_a_space() {
        assert_eq!(parse_size("512mb").unwrap(), 512_000_000);
        assert_eq!(parse_size("2 gib").unwrap(), 2 * GIB);
        assert_eq!(parse_size(" 2 GIB ").unwrap(), 2 * GIB);
    }

    #[test]
    fn bare_number_is_bytes() {
        assert_eq!(parse_size("1048576").unwrap(), MIB);
    }

    #[test]
    fn fractions_round_down() {
        assert_eq!(parse_size("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), GIB + GIB / 2);
        assert_eq!(parse_size("0.5KiB").unwrap(), 512);
        assert_eq!(parse_size("1.5B").unwrap(), 1);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "MB", "-1GB", "1.2.3GB", "1.GB", ".5GB", "12 XB", "1 G", "one GB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
        let msg = parse_size("12XB").unwrap_err();
        assert!(msg.contains("unknown unit `XB`"), "{msg}");
        assert!(msg.contains("GiB"), "{msg}");
    }

    #[test]
    fn rejects_overflow() {
        assert!(parse_size("18446744073709551615").is_ok());
        assert!(parse_size("18446744073709551616").is_err());
        assert!(parse_size("99999999999999999999999999999999999999999TiB").is_err());
        let msg = parse_size("20000000TiB").unwrap_err();
        assert!(msg.contains("too large"), "{msg}");
    }

    #[test]
    fn human_bytes_picks_an_exact_unit() {
        assert_eq!(human_bytes(256 * MIB), "256 MiB");
        assert_eq!(human_bytes(2 * GIB), "2 GiB");
        assert_eq!(human_bytes(512_000_000), "512 MB");
        assert_eq!(human_bytes(1000), "1 KB");
        assert_eq!(human_bytes(1001), "1001 bytes");
    }
}

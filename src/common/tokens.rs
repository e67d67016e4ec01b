//! How many tokens a text costs a model, estimated without a tokenizer.
//!
//! chars/4 is right for English and code but under-counts other scripts badly (CJK text costs
//! about one token per character, ~4× what chars/4 says). loom counts per character by its UTF-8
//! width, which tracks the script:
//!
//! | character | UTF-8 bytes | tokens |
//! |---|---|---|
//! | ASCII | 1 | 1/4 |
//! | Latin accents, Greek, Cyrillic, Hebrew, Arabic … | 2 | 1/2 |
//! | CJK, Hangul, Devanagari, Thai …, emoji | 3–4 | 1 |
//!
//! The estimate is the sum, rounded up. Because every character costs at most one token per 3
//! bytes, `bytes / 3` is an upper bound — which lets a small result skip parsing entirely.

/// Estimated tokens of `text`.
pub(crate) fn estimate_tokens(text: &str) -> usize {
    // Most results are ASCII, checked many bytes at a time.
    if text.is_ascii() {
        return text.len().div_ceil(4);
    }
    // Count in quarter tokens to stay in integers: each character is charged at its first byte
    // (continuation bytes cost nothing), a branch-free sum the compiler vectorises.
    let quarters: usize = text
        .as_bytes()
        .iter()
        .map(|&b| match b {
            0x00..=0x7f => 1,
            0x80..=0xbf => 0,
            0xc0..=0xdf => 2,
            _ => 4,
        })
        .sum();
    quarters.div_ceil(4)
}

/// An upper bound of [`estimate_tokens`] for any text of `bytes` UTF-8 bytes (or any JSON whose
/// decoded strings come from that many bytes).
pub(crate) fn upper_bound_tokens(bytes: usize) -> usize {
    bytes.div_ceil(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_text_is_about_four_chars_per_token() {
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens(""), 0);
    }

    #[test]
    fn cjk_costs_a_token_per_character() {
        assert_eq!(estimate_tokens("数据库连接"), 5);
        assert_eq!(estimate_tokens("データ"), 3);
        // chars/4 would say 2 for this; the honest count is ~8.
        assert_eq!(estimate_tokens("用户名和电子邮件"), 8);
    }

    #[test]
    fn two_byte_scripts_cost_half_a_token() {
        assert_eq!(estimate_tokens("привет"), 3);
        assert_eq!(estimate_tokens("é"), 1);
    }

    #[test]
    fn the_byte_bound_is_an_upper_bound() {
        for text in ["abc", "привет мир", "数据库", "😀😀", "mixed 数据 é"] {
            assert!(
                estimate_tokens(text) <= upper_bound_tokens(text.len()),
                "{text}"
            );
        }
    }
}

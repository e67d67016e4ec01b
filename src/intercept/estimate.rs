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
pub fn estimate_tokens(text: &str) -> usize {
    // Count in quarter tokens to stay in integers.
    let mut quarters: usize = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (width, cost) = if b < 0x80 {
            (1, 1)
        } else if b >> 5 == 0b110 {
            (2, 2)
        } else if b >> 4 == 0b1110 {
            (3, 4)
        } else {
            (4, 4)
        };
        quarters += cost;
        i += width;
    }
    quarters.div_ceil(4)
}

/// An upper bound of [`estimate_tokens`] for any text of `bytes` UTF-8 bytes (or any JSON whose
/// decoded strings come from that many bytes).
pub fn upper_bound_tokens(bytes: usize) -> usize {
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

//! The degraded path: tag stripping without a parser, for pages the scan says are too deep or
//! too costly to parse safely, and for pages whose deadline passed.

use super::*;

/// The page's text. Linear in the page, so it is also the fallback once the deadline has
/// passed: it stops only on cancel (`Err`), and otherwise always finishes.
pub(super) fn flat_reduction(
    html: &str,
    method: ReductionMethod,
    interrupt: &Interrupt,
) -> Result<PageReduction, String> {
    let cancel = interrupt.cancel_only();
    let mut pulse = cancel.pulse();
    let mut out = String::new();
    let mut title = None;
    let mut pending_space = false;
    let mut pending_break = false;
    let mut tokens = Tokens::new(html);
    while let Some(token) = tokens.next() {
        if pulse.beat() {
            return Err(CANCELLED.to_string());
        }
        match token {
            Token::Tag { name, closing, .. } => {
                if !closing && is_raw_text_element(name) {
                    tokens.raw_text_until_end_of(name);
                }
                let lower = name.to_ascii_lowercase();
                if lower == "br"
                    || closes_paragraph(&lower)
                    || matches!(lower.as_str(), "li" | "tr" | "td" | "th" | "dt" | "dd")
                {
                    pending_break = true;
                }
            }
            Token::RawText { name, text } => {
                if title.is_none() && name.eq_ignore_ascii_case("title") {
                    title =
                        Some(collapse_whitespace(&decode_entities(text))).filter(|t| !t.is_empty());
                }
                // Text a reader sees (the parsed path renders these too); the others are
                // scripts, styles, form fields and frames.
                if ["xmp", "plaintext", "noembed", "noframes"]
                    .iter()
                    .any(|shown| name.eq_ignore_ascii_case(shown))
                {
                    push_words(&mut out, text, &mut pending_space, &mut pending_break);
                    pending_break = true;
                }
            }
            Token::Text(t) => {
                push_words(
                    &mut out,
                    &decode_entities(t),
                    &mut pending_space,
                    &mut pending_break,
                );
            }
        }
    }
    let chars = out.chars().count();
    Ok(PageReduction {
        markdown: out,
        title,
        main_content_only: false,
        page_text_chars: chars,
        main_text_chars: chars,
        tables: Vec::new(),
        method,
    })
}

/// `text`'s words, after a line break or a space where one is pending.
fn push_words(out: &mut String, text: &str, pending_space: &mut bool, pending_break: &mut bool) {
    for (i, word) in text.split_whitespace().enumerate() {
        if !out.is_empty() {
            if *pending_break {
                out.push('\n');
            } else if *pending_space || i > 0 {
                out.push(' ');
            }
        }
        *pending_break = false;
        *pending_space = false;
        out.push_str(word);
    }
    if text.ends_with(char::is_whitespace) {
        *pending_space = true;
    }
}

/// Entity decoding for the parser-less path: every named reference of HTML5 and numeric ones.
pub(super) fn decode_entities(text: &str) -> String {
    html_escape::decode_html_entities(text).into_owned()
}

pub(super) fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::decode_entities;

    #[test]
    fn every_named_reference_decodes_not_only_the_common_ones() {
        assert_eq!(
            decode_entities("caf&eacute; &hearts; &rarr; &#x1F600; &#233; &amp;lt; &nbsp;x"),
            "café ♥ → 😀 é &lt; \u{a0}x"
        );
        // Not a reference: kept as written.
        assert_eq!(
            decode_entities("a & b &unknown; &#xZZ;"),
            "a & b &unknown; &#xZZ;"
        );
    }
}

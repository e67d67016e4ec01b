//! The degraded path: tag stripping without a parser, for pages the scan says are too deep or
//! too large to parse safely.

use super::*;

pub(super) fn flat_reduction(html: &str) -> PageReduction {
    let mut out = String::new();
    let mut title = None;
    let mut pending_space = false;
    let mut pending_break = false;
    let mut tokens = Tokens::new(html);
    while let Some(token) = tokens.next() {
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
            }
            Token::Text(t) => {
                let decoded = decode_entities(t);
                for (i, word) in decoded.split_whitespace().enumerate() {
                    if !out.is_empty() {
                        if pending_break {
                            out.push('\n');
                        } else if pending_space || i > 0 {
                            out.push(' ');
                        }
                    }
                    pending_break = false;
                    pending_space = false;
                    out.push_str(word);
                }
                if decoded.ends_with(char::is_whitespace) {
                    pending_space = true;
                }
            }
        }
    }
    let chars = out.chars().count();
    PageReduction {
        markdown: out,
        title,
        main_content_only: false,
        page_text_chars: chars,
        main_text_chars: chars,
        tables: Vec::new(),
        method: ReductionMethod::FlatText,
    }
}

/// Entity decoding for the parser-less path: numeric references and the common named ones.
pub(super) fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.bytes().take(12).position(|b| b == b';');
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let ch = if let Some(num) = entity.strip_prefix('#') {
                let value = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse::<u32>().ok(),
                };
                value.and_then(char::from_u32)
            } else {
                named_entity(entity)
            };
            ch.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

pub(super) fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "para" => '¶',
        "sect" => '§',
        "middot" => '·',
        "bull" => '•',
        "times" => '×',
        _ => return None,
    })
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

//! The final cut of a text tool result to a character budget, leaving a marker line where text
//! was left out so the model can read it back from the kept document.
//!
//! Work is linear: one count of characters and newlines over the whole text, then scans bounded
//! by the budget from either end.

/// Which parts of a too-long text to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// About three quarters head, one quarter tail: in logs and command output the first errors
    /// and the final summary both matter.
    HeadAndTail,
    /// The head only (pages, prose), cut at a paragraph boundary when one is near.
    HeadOnly,
}

/// What was left out, in the input's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Omitted {
    /// Code points into the input.
    pub offset: usize,
    /// Code points.
    pub length: usize,
    /// 1-based, inclusive, lines of the input (a final `\n` ends the last line, it does not
    /// start another).
    pub first_line: usize,
    pub last_line: usize,
}

/// The output fits `max_chars` whenever `max_chars` is at least the marker's length plus this:
/// the two newlines that put the marker on a line of its own. (Only a marker whose length grows
/// when its numbers shrink could need more; the cut then retries with less text.)
pub const MARKER_SLACK: usize = 2;

/// A line kept whole may waste at most this share of its part of the budget (1/2); a line
/// straddling the limit that would waste more is cut inside instead.
const LINE_WASTE_DIV: usize = 2;

/// A blank line counts as "near" when cutting there keeps at least 4/5 of what the line cut keeps.
const PARAGRAPH_NEAR_DIV: usize = 5;

/// How far back (or forward, for the tail) a cut inside a line looks for a space or punctuation:
/// an eighth of its budget part, at most this many characters.
const SOFT_BREAK_WINDOW: usize = 120;

/// Bounds the steps taken to avoid splitting a grapheme: past this it is not one worth keeping.
const GRAPHEME_STEPS: usize = 32;

/// Cut `text` to at most `max_chars` code points (marker included) at line boundaries (paragraph
/// boundaries preferred for `HeadOnly` when one is near), keeping about three quarters head and
/// one quarter tail for `HeadAndTail`, or the head only. `marker(&omitted)` writes the line put
/// where text was left out (without a newline; the cut adds those). None when the text fits.
///
/// The output is `head + [\n] + marker + [\n] + tail` where `head` and `tail` are exactly the
/// input's first `omitted.offset` and last `total - offset - length` code points; the newline
/// before the marker is there only when the head does not end with one, the one after only when
/// a tail follows. When `max_chars` is below the marker's length the marker alone is returned.
pub fn cut_to_budget(
    text: &str,
    max_chars: usize,
    keep: Keep,
    marker: &dyn Fn(&Omitted) -> String,
) -> Option<String> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    let newlines = count_newlines(text.as_bytes());
    let total_lines = newlines + usize::from(!text.ends_with('\n'));
    // The marker's length depends on where the cut falls; the largest numbers it can carry
    // bound it for any marker whose length grows with its numbers.
    let worst = Omitted {
        offset: total,
        length: total,
        first_line: total_lines,
        last_line: total_lines,
    };
    let mut reserve = marker(&worst).chars().count() + MARKER_SLACK;
    for _ in 0..8 {
        let content = max_chars.saturating_sub(reserve);
        let (out, len) = assemble(text, total, newlines, content, keep, marker);
        if len <= max_chars || content == 0 {
            return Some(out);
        }
        reserve += len - max_chars;
    }
    Some(assemble(text, total, newlines, 0, keep, marker).0)
}

/// The output for `content` code points of kept text, and its length in code points.
fn assemble(
    text: &str,
    total: usize,
    newlines: usize,
    content: usize,
    keep: Keep,
    marker: &dyn Fn(&Omitted) -> String,
) -> (String, usize) {
    let (head_end, head_chars, tail_start, tail_chars) = match keep {
        Keep::HeadOnly => {
            let (e, c) = cut_head(text, content, true);
            (e, c, text.len(), 0)
        }
        Keep::HeadAndTail => {
            let (e, c) = cut_head(text, content - content / 4, false);
            // Whatever the head's line cut left unused goes to the tail.
            let (s, t) = cut_tail(text, content.saturating_sub(c), e);
            (e, c, s, t)
        }
    };
    let head = text.get(..head_end).unwrap_or("");
    let tail = text.get(tail_start..).unwrap_or("");
    let omitted_text = text.get(head_end..tail_start).unwrap_or("");
    let head_newlines = count_newlines(head.as_bytes());
    let omitted_newlines = newlines - head_newlines - count_newlines(tail.as_bytes());
    let first_line = head_newlines + 1;
    let omitted = Omitted {
        offset: head_chars,
        length: total - head_chars - tail_chars,
        first_line,
        // A final `\n` belongs to the line it ends.
        last_line: first_line + omitted_newlines - usize::from(omitted_text.ends_with('\n')),
    };
    let m = marker(&omitted);
    let sep_before = !head.is_empty() && !head.ends_with('\n');
    let sep_after = !tail.is_empty();
    let mut out = String::with_capacity(head.len() + m.len() + tail.len() + 2);
    out.push_str(head);
    if sep_before {
        out.push('\n');
    }
    out.push_str(&m);
    if sep_after {
        out.push('\n');
    }
    out.push_str(tail);
    let len = head_chars
        + tail_chars
        + m.chars().count()
        + usize::from(sep_before)
        + usize::from(sep_after);
    (out, len)
}

fn count_newlines(b: &[u8]) -> usize {
    // A plain filter-count vectorises well; memchr's iterator is slower for dense newlines.
    b.iter().filter(|&&c| c == b'\n').count()
}

/// The longest head of at most `budget` code points: `(end byte, code points)`.
fn cut_head(text: &str, budget: usize, paragraphs: bool) -> (usize, usize) {
    if budget == 0 {
        return (0, 0);
    }
    let limit = text
        .char_indices()
        .nth(budget)
        .map_or(text.len(), |(i, _)| i);
    let window = text.get(..limit).unwrap_or("");
    if limit == text.len() {
        return (limit, window.chars().count());
    }
    let line_end = memchr::memrchr(b'\n', window.as_bytes()).map_or(0, |p| p + 1);
    let line_chars = text.get(..line_end).map_or(0, |s| s.chars().count());
    if line_chars >= budget - budget / LINE_WASTE_DIV && line_end > 0 {
        if paragraphs && let Some(p) = paragraph_end(text, line_end) {
            return (p, text.get(..p).map_or(0, |s| s.chars().count()));
        }
        return (line_end, line_chars);
    }
    let span = (budget / 8).min(SOFT_BREAK_WINDOW);
    let inside = text.get(line_end..limit).unwrap_or("");
    let mut cut = inside
        .char_indices()
        .rev()
        .take(span)
        .find(|&(_, c)| is_soft_break(c))
        .map_or(limit, |(i, c)| line_end + i + c.len_utf8());
    cut = grapheme_back(text, cut, line_end);
    (
        cut,
        line_chars + text.get(line_end..cut).map_or(0, |s| s.chars().count()),
    )
}

/// The longest tail of at most `budget` code points starting at or after `min_start`:
/// `(start byte, code points)`.
fn cut_tail(text: &str, budget: usize, min_start: usize) -> (usize, usize) {
    if budget == 0 {
        return (text.len(), 0);
    }
    let limit = text
        .char_indices()
        .rev()
        .nth(budget - 1)
        .map_or(0, |(i, _)| i)
        .max(min_start);
    let b = text.as_bytes();
    let line_start = if limit == 0 || b.get(limit - 1) == Some(&b'\n') {
        limit
    } else {
        b.get(limit..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(text.len(), |p| limit + p + 1)
    };
    let count = |from: usize| text.get(from..).map_or(0, |s| s.chars().count());
    let line_chars = count(line_start);
    if line_chars >= budget - budget / LINE_WASTE_DIV && line_chars > 0 {
        return (line_start, line_chars);
    }
    // The tail starts inside a line: right after a space or punctuation near the limit.
    let span = (budget / 8).min(SOFT_BREAK_WINDOW);
    let inside = text.get(limit..line_start).unwrap_or("");
    let mut cut = inside
        .char_indices()
        .take(span)
        .find(|&(_, c)| is_soft_break(c))
        .map_or(limit, |(i, c)| limit + i + c.len_utf8());
    cut = grapheme_forward(text, cut, line_start);
    (cut, count(cut))
}

/// Where a head cut at `line_end` would better end: just after a blank line close before it.
fn paragraph_end(text: &str, line_end: usize) -> Option<usize> {
    let b = text.as_bytes();
    let floor = line_end - line_end / PARAGRAPH_NEAR_DIV;
    // `line_end - 1` is the newline ending the last kept line; look at the lines before it.
    let mut end = line_end.checked_sub(1)?;
    while end > floor {
        let start = memchr::memrchr(b'\n', b.get(..end)?).map_or(0, |p| p + 1);
        let line = b.get(start..end)?;
        if start > 0 && line.iter().all(|c| c.is_ascii_whitespace()) {
            // Cutting right after the blank line: the next paragraph starts the omitted part.
            return (end + 1 < line_end).then_some(end + 1);
        }
        end = start.checked_sub(1)?;
    }
    None
}

fn is_soft_break(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ',' | ';' | ':' | '.' | '!' | '?' | ')' | ']' | '}' | '>' | '|' | '&'
        )
}

/// Code points that continue the grapheme before them (no Unicode tables without a dependency:
/// the common marks, joiners, variation selectors, skin tones and tag characters).
fn extends(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
        | 0x200C | 0x200D | 0xFE00..=0xFE0F | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F
        | 0xE0100..=0xE01EF)
}

fn is_regional_indicator(c: char) -> bool {
    matches!(c as u32, 0x1F1E6..=0x1F1FF)
}

/// Whether a cut at byte `at` would split a grapheme (ZWJ sequence, combining mark, flag, CRLF).
fn splits_grapheme(text: &str, at: usize) -> bool {
    let (Some(before), Some(after)) = (text.get(..at), text.get(at..)) else {
        return false;
    };
    let (Some(prev), Some(next)) = (before.chars().next_back(), after.chars().next()) else {
        return false;
    };
    if extends(next) || prev == '\u{200D}' || (prev == '\r' && next == '\n') {
        return true;
    }
    if is_regional_indicator(prev) && is_regional_indicator(next) {
        // Flags are pairs: the cut splits one when an odd number of indicators precede it. The
        // whole run is counted (a bound would guess the parity); this happens at most twice a cut.
        let run = before
            .chars()
            .rev()
            .take_while(|&c| is_regional_indicator(c))
            .count();
        return run % 2 == 1;
    }
    false
}

fn grapheme_back(text: &str, mut at: usize, floor: usize) -> usize {
    for _ in 0..GRAPHEME_STEPS {
        if at <= floor || !splits_grapheme(text, at) {
            break;
        }
        at = text
            .get(..at)
            .and_then(|s| s.char_indices().next_back())
            .map_or(floor, |(i, _)| i.max(floor));
    }
    at
}

fn grapheme_forward(text: &str, mut at: usize, ceiling: usize) -> usize {
    for _ in 0..GRAPHEME_STEPS {
        if at >= ceiling || !splits_grapheme(text, at) {
            break;
        }
        at = text
            .get(at..)
            .and_then(|s| s.chars().next())
            .map_or(ceiling, |c| (at + c.len_utf8()).min(ceiling));
    }
    at
}

#[cfg(test)]
mod tests;

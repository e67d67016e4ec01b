//! An upper bound of the attribute work the parser does, found before it runs.
//!
//! html5ever's tokenizer checks each attribute's name against every earlier attribute of its tag
//! (a linear search per attribute), so a tag of n attributes costs n(n−1)/2 comparisons: one
//! `<div>` of 200,000 attributes (1.9 MB) took minutes, and 4.7 MB of elements with thousands of
//! attributes each took 88 s (issue 35). A repeated `<html>` or `<body>` start tag merges its
//! attributes into the element's by the same search, against all it holds already.
//!
//! Where a tag starts depends on the parser's state (script and RCDATA text, comments, foreign
//! content), which a byte scan can only guess, and a wrong guess can hide a tag inside what it
//! took for a quoted value. So this bound trusts no reading: a tag may start at *every* `<`, and
//! from a given `<` the tokenizer's path through a tag is fixed (it does not depend on the tree
//! builder), so every candidate is followed at once. Candidates that reach the same tokenizer
//! state at the same byte behave the same from then on and are merged into one group that keeps
//! how many tags it holds and the sums of n and n² over them, so the scan stays linear however
//! many candidates overlap, and the sum of n(n−1)/2 over all candidates bounds what the parser
//! pays over the tags it really finds.

use crate::reduce::interrupt::{Interrupt, Stop};

/// The tokenizer's states inside a tag (html5ever's names), plus the two after `<`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    TagOpen,
    EndTagOpen,
    TagName,
    BeforeName,
    Name,
    AfterName,
    BeforeValue,
    DoubleQuoted,
    SingleQuoted,
    Unquoted,
    AfterQuoted,
    SelfClosing,
}

/// Whether a group's tags are `<html>`/`<body>` start tags, whose attributes are also merged into
/// the element; while in the tag name, how much of such a name has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Other,
    /// `len` bytes of `html` (`html: true`) or `body` read so far, nothing else.
    Prefix {
        html: bool,
        len: u8,
    },
    Root,
}

/// Tags following the same path: how many, and the sums of their attribute counts and squares.
#[derive(Debug, Clone, Copy, Default)]
struct Group {
    tags: u64,
    n: u64,
    n2: u64,
}

impl Group {
    fn merge(&mut self, other: Group) {
        self.tags = self.tags.saturating_add(other.tags);
        self.n = self.n.saturating_add(other.n);
        self.n2 = self.n2.saturating_add(other.n2);
    }

    /// Every tag of the group gets one more attribute: (n+1)² = n² + 2n + 1.
    fn add_attribute(&mut self) {
        self.n2 = self
            .n2
            .saturating_add(self.n.saturating_mul(2))
            .saturating_add(self.tags);
        self.n = self.n.saturating_add(self.tags);
    }

    /// Comparisons of the tokenizer's duplicate check over the group's tags.
    fn pairs(&self) -> u64 {
        self.n2.saturating_sub(self.n) / 2
    }
}

fn is_space(b: u8) -> bool {
    // CR is whitespace too: the tokenizer turns it into LF before any state sees it.
    matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

/// What one byte does to a tag in `state`: its next state (`None`: the tag ended with this
/// byte, or it was no tag) and whether an attribute started.
fn step(state: State, b: u8) -> (Option<State>, bool) {
    use State::*;
    match state {
        TagOpen if b.is_ascii_alphabetic() => (Some(TagName), false),
        TagOpen if b == b'/' => (Some(EndTagOpen), false),
        EndTagOpen if b.is_ascii_alphabetic() => (Some(TagName), false),
        // `<!`, `<?`, `</>`, `</1`, `<1`: a comment, a bogus comment or text, no tag.
        TagOpen | EndTagOpen => (None, false),
        TagName => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            _ if is_space(b) => (Some(BeforeName), false),
            _ => (Some(TagName), false),
        },
        BeforeName => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            _ if is_space(b) => (Some(BeforeName), false),
            _ => (Some(Name), true),
        },
        Name => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            b'=' => (Some(BeforeValue), false),
            _ if is_space(b) => (Some(AfterName), false),
            _ => (Some(Name), false),
        },
        AfterName => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            b'=' => (Some(BeforeValue), false),
            _ if is_space(b) => (Some(AfterName), false),
            _ => (Some(Name), true),
        },
        BeforeValue => match b {
            b'>' => (None, false),
            b'"' => (Some(DoubleQuoted), false),
            b'\'' => (Some(SingleQuoted), false),
            _ if is_space(b) => (Some(BeforeValue), false),
            _ => (Some(Unquoted), false),
        },
        DoubleQuoted => (
            Some(if b == b'"' { AfterQuoted } else { DoubleQuoted }),
            false,
        ),
        SingleQuoted => (
            Some(if b == b'\'' {
                AfterQuoted
            } else {
                SingleQuoted
            }),
            false,
        ),
        Unquoted => match b {
            b'>' => (None, false),
            _ if is_space(b) => (Some(BeforeName), false),
            _ => (Some(Unquoted), false),
        },
        // Anything else is reconsumed in the before-attribute-name state, where it can only
        // start an attribute (whitespace, `/` and `>` are handled here already).
        AfterQuoted => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            _ if is_space(b) => (Some(BeforeName), false),
            _ => (Some(Name), true),
        },
        SelfClosing => match b {
            b'>' => (None, false),
            b'/' => (Some(SelfClosing), false),
            _ if is_space(b) => (Some(BeforeName), false),
            _ => (Some(Name), true),
        },
    }
}

/// One tag as the tokenizer reads it from its `<`, when it starts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TagExtent {
    /// One past the name's last byte (the name runs to whitespace, `/` or `>`).
    pub(super) name_end: usize,
    /// One past the closing `>`; the text's end when the tag is cut off.
    pub(super) end: usize,
    pub(super) attributes: u32,
    /// Ended by `/>` (not by a value ending in `/`).
    pub(super) self_closing: bool,
}

/// The tokenizer's path through the tag whose name starts at `name_start` (the byte after `<`
/// or `</`, a letter). The same states as [`attribute_work`] follows for every candidate, so the
/// scan's tags end where the parser's do (a `>` in a quoted value does not end one, a quote that
/// does not follow `=` opens nothing).
pub(super) fn read_tag(bytes: &[u8], name_start: usize) -> TagExtent {
    let mut state = State::TagName;
    let mut extent = TagExtent {
        name_end: bytes.len(),
        end: bytes.len(),
        attributes: 0,
        self_closing: false,
    };
    let mut i = name_start + 1;
    while i < bytes.len() {
        // Quoted values are skipped whole: only their closing quote matters.
        let quote = match state {
            State::DoubleQuoted => Some(b'"'),
            State::SingleQuoted => Some(b'\''),
            _ => None,
        };
        if let Some(quote) = quote {
            match memchr::memchr(quote, &bytes[i..]) {
                Some(at) => i += at,
                None => break,
            }
        }
        let b = bytes[i];
        let (next, attribute) = step(state, b);
        if state == State::TagName && next != Some(State::TagName) {
            extent.name_end = i;
        }
        if attribute {
            extent.attributes = extent.attributes.saturating_add(1);
        }
        match next {
            Some(next) => state = next,
            None => {
                extent.self_closing = state == State::SelfClosing;
                extent.end = i + 1;
                break;
            }
        }
        i += 1;
    }
    extent.name_end = extent.name_end.min(extent.end);
    extent
}

/// The tag name so far, for telling `<html>`/`<body>` apart: `kind` after `b` is read in `state`.
fn kind_after(kind: Kind, state: State, b: u8) -> Kind {
    match (kind, state) {
        // The first byte of a start tag's name.
        (Kind::Other, State::TagOpen) => match b.to_ascii_lowercase() {
            b'h' => Kind::Prefix { html: true, len: 1 },
            b'b' => Kind::Prefix {
                html: false,
                len: 1,
            },
            _ => Kind::Other,
        },
        (Kind::Prefix { html, len }, State::TagName) => {
            let name: &[u8] = if html { b"html" } else { b"body" };
            match b {
                _ if b == b'>' || b == b'/' || is_space(b) => {
                    if usize::from(len) == name.len() {
                        Kind::Root
                    } else {
                        Kind::Other
                    }
                }
                _ if name.get(usize::from(len)) == Some(&b.to_ascii_lowercase()) => {
                    Kind::Prefix { html, len: len + 1 }
                }
                _ => Kind::Other,
            }
        }
        (kind, _) => kind,
    }
}

const STATES: usize = 12;
/// Per state: Other, Root, and the eight name prefixes (only in the tag name).
const KINDS: usize = 10;

fn slot(state: State, kind: Kind) -> usize {
    let k = match kind {
        Kind::Other => 0,
        Kind::Root => 1,
        Kind::Prefix { html, len } => 2 + usize::from(!html) * 4 + usize::from(len.min(4) - 1),
    };
    state as usize * KINDS + k
}

fn unslot(index: usize) -> (State, Kind) {
    use State::*;
    const ALL: [State; STATES] = [
        TagOpen,
        EndTagOpen,
        TagName,
        BeforeName,
        Name,
        AfterName,
        BeforeValue,
        DoubleQuoted,
        SingleQuoted,
        Unquoted,
        AfterQuoted,
        SelfClosing,
    ];
    let state = ALL[index / KINDS];
    let kind = match index % KINDS {
        0 => Kind::Other,
        1 => Kind::Root,
        k => Kind::Prefix {
            html: k < 6,
            len: ((k - 2) % 4 + 1) as u8,
        },
    };
    (state, kind)
}

/// What the bound found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct AttributeWork {
    /// Name comparisons the parser may make: its duplicate check within each tag, and the
    /// merges of repeated `<html>`/`<body>` attributes.
    pub(super) comparisons: u64,
    /// Steps taken: one per candidate group per byte, a work counter for tests (the scan must
    /// stay linear however many candidates overlap).
    pub(super) steps: u64,
}

/// An upper bound of the parser's attribute work on `html`; the scan stops as soon as it passes
/// `limit` (the page is then past the bound whatever the rest holds), or when `interrupt` fires.
pub(super) fn attribute_work(
    html: &str,
    limit: u64,
    interrupt: &Interrupt,
) -> Result<AttributeWork, Stop> {
    let bytes = html.as_bytes();
    let mut groups = [Group::default(); STATES * KINDS];
    // Occupied slots, one bit each (120 slots).
    let mut occupied: u128 = 0;
    let mut moves: Vec<(usize, Group)> = Vec::with_capacity(STATES * KINDS);
    let mut work = AttributeWork::default();
    // Attributes the `<html>` and `<body>` elements may hold (all their start tags' together).
    let mut root_attributes: u64 = 0;
    let mut pulse = interrupt.pulse();
    let mut i = 0;
    while i < bytes.len() {
        if occupied == 0 {
            // Outside every candidate: only a `<` can start one.
            let Some(lt) = memchr::memchr(b'<', &bytes[i..]) else {
                break;
            };
            if pulse.beat_by(lt + 1) {
                return Err(pulse.stopped().unwrap_or(Stop::Deadline));
            }
            i += lt;
        } else {
            // One candidate inside a quoted value: only its quote or a new `<` changes anything
            // (a value can be megabytes).
            let quote = match unslot(occupied.trailing_zeros() as usize).0 {
                _ if !occupied.is_power_of_two() => None,
                State::DoubleQuoted => Some(b'"'),
                State::SingleQuoted => Some(b'\''),
                _ => None,
            };
            let skip = match quote {
                Some(quote) => memchr::memchr2(quote, b'<', &bytes[i..]).unwrap_or(bytes.len() - i),
                None => 0,
            };
            if pulse.beat_by(skip + 1) {
                return Err(pulse.stopped().unwrap_or(Stop::Deadline));
            }
            i += skip;
            if i == bytes.len() {
                break;
            }
        }
        let b = bytes[i];
        moves.clear();
        let mut bits = occupied;
        while bits != 0 {
            let index = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut group = std::mem::take(&mut groups[index]);
            let (state, kind) = unslot(index);
            let (next, attribute) = step(state, b);
            let kind = kind_after(kind, state, b);
            work.steps += 1;
            if attribute {
                group.add_attribute();
                // A tag is paid for as its attributes come: one of 200,000 attributes is past
                // the bound long before its end.
                let pending = work.comparisons.saturating_add(group.pairs());
                if pending > limit {
                    work.comparisons = pending;
                    return Ok(work);
                }
            }
            match next {
                Some(next) => moves.push((slot(next, kind), group)),
                None if matches!(state, State::TagOpen | State::EndTagOpen) => {}
                None => {
                    // The tag ended here: its duplicate checks are paid, and an `<html>` or
                    // `<body>` merges its attributes against all the element holds (the
                    // merge first copies the names it holds, once per tag).
                    work.comparisons = work.comparisons.saturating_add(group.pairs());
                    if kind == Kind::Root {
                        let merge = group.tags.saturating_add(group.n);
                        work.comparisons = work
                            .comparisons
                            .saturating_add(merge.saturating_mul(root_attributes));
                        root_attributes = root_attributes.saturating_add(group.n);
                    }
                }
            }
        }
        occupied = 0;
        for &(index, group) in &moves {
            groups[index].merge(group);
            occupied |= 1 << index;
        }
        if b == b'<' {
            let index = slot(State::TagOpen, Kind::Other);
            groups[index].merge(Group {
                tags: 1,
                n: 0,
                n2: 0,
            });
            occupied |= 1 << index;
        }
        if work.comparisons > limit {
            return Ok(work);
        }
        i += 1;
    }
    // Tags cut off by the end of the text were checked as their attributes came.
    let mut bits = occupied;
    while bits != 0 {
        let index = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        work.comparisons = work.comparisons.saturating_add(groups[index].pairs());
    }
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(html: &str) -> u64 {
        match attribute_work(html, u64::MAX, &Interrupt::none()) {
            Ok(work) => work.comparisons,
            Err(stop) => panic!("stopped: {stop:?}"),
        }
    }

    fn attributes(n: usize) -> String {
        (0..n).map(|i| format!(" a{i}=v")).collect()
    }

    #[test]
    fn a_tag_of_n_attributes_costs_n_choose_2() {
        assert_eq!(work("<p>x</p>"), 0);
        assert_eq!(work(&format!("<div{}>x</div>", attributes(10))), 45);
        assert_eq!(work(&format!("<div{}/>", attributes(3))), 3);
        // Quoted values hide nothing from the count, and `>` inside them does not end the tag.
        assert_eq!(work(r#"<a href="x>y" title='a b' id=z data-x>t</a>"#), 6);
        // Attributes glued to a quoted value or after a stray `/` are attributes all the same.
        assert_eq!(work(r#"<a x="1"y="2"/z>"#), 3);
        // End tags carry attributes through the same check.
        assert_eq!(work(&format!("</div{}>", attributes(4))), 6);
        // Not tags: comments, `<!doctype>`, a lone `<`.
        assert_eq!(work("<!-- a b c --> <!doctype html> 1 < 2"), 0);
    }

    #[test]
    fn a_tag_hidden_in_what_one_reading_takes_for_a_quoted_value_is_counted() {
        // In a <textarea> the parser reads `<p a="` as text and the <h> as a tag; a scan that took
        // the <p> for a tag would see the <h>'s attributes inside its quoted value.
        let hidden = format!("<textarea><p a=\"</textarea><h{}>\">", attributes(100));
        assert!(work(&hidden) >= 100 * 99 / 2, "{}", work(&hidden));
        // A `<` in an attribute name starts a candidate of its own.
        let inside = format!("<p a<h{}>", attributes(50));
        assert!(work(&inside) >= 50 * 49 / 2);
    }

    #[test]
    fn overlapping_candidates_are_merged_and_the_scan_stays_linear() {
        // Every `<` starts a candidate that runs to the end of the text (each quote it opens
        // swallows the next `<`): 200,000 candidates, merged into a few groups.
        for chain in [
            "<a x=\"".repeat(200_000),
            "<a x='<b y=\"".repeat(100_000),
            "<a<b<c d ".repeat(100_000),
        ] {
            let work = attribute_work(&chain, u64::MAX, &Interrupt::none()).unwrap_or_default();
            assert!(
                work.steps <= 4 * chain.len() as u64,
                "{} steps for {} bytes",
                work.steps,
                chain.len()
            );
            assert!(work.comparisons > 1_000_000_000, "{}", work.comparisons);
        }
    }

    #[test]
    fn repeated_root_tags_pay_for_merging_into_the_element() {
        let one = work("<body a b c>");
        assert_eq!(one, 3);
        // The second <body> merges 3 names against the 3 held (and copies them): 3 + 3×3 + 3.
        let two = work("<body a b c><body d e f>");
        assert_eq!(two, 3 + 3 + (1 + 3) * 3);
        // <bodyx> is not <body>.
        assert_eq!(work("<bodyx a b c><bodyx d e f>"), 6);
    }

    #[test]
    fn the_scan_stops_past_the_limit_and_on_cancel() {
        let page = format!("<div{}>", attributes(10_000));
        let early = attribute_work(&page, 1_000, &Interrupt::none()).unwrap_or_default();
        assert!(early.comparisons > 1_000 && early.comparisons < 2_000);
        assert!(
            early.steps < 1_000,
            "stopped at the 46th attribute: {}",
            early.steps
        );
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        assert_eq!(
            attribute_work(&page, u64::MAX, &Interrupt::none().with_cancel(flag)),
            Err(Stop::Cancelled)
        );
    }
}

//! STUB — replaced by the real stage.
#[derive(Clone, Copy)]
pub enum Keep {
    HeadAndTail,
    HeadOnly,
}
pub struct Omitted {
    pub offset: usize,
    pub length: usize,
    pub first_line: usize,
    pub last_line: usize,
}
pub fn cut_to_budget(
    _text: &str,
    _max_chars: usize,
    _keep: Keep,
    _marker: &dyn Fn(&Omitted) -> String,
) -> Option<String> {
    None
}

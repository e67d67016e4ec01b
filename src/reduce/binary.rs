//! STUB — replaced by the real stage.
pub const DEFAULT_MIN_RUN: usize = 1024;
pub struct FoundBlob {
    pub mime: String,
    pub bytes: Vec<u8>,
    pub data_uri: bool,
}
pub fn lift_binary(
    _text: &str,
    _min_run: usize,
    _keep: &mut dyn FnMut(FoundBlob) -> Option<String>,
) -> Option<String> {
    None
}

//! How record bytes are written as JSON strings: UTF-8 text, or base64
//! when asked for (`?encoding=base64`) or when the bytes are not UTF-8.
//! Shared by the append parser (`records_in`), the read writer
//! (`records_out`) and the handlers (`records`, `sse`).

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Standard alphabet; padding optional on input, always written on output.
pub(crate) const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How keys, values and header values are written in JSON bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8 strings (the default).
    Utf8,
    /// `?encoding=base64`.
    Base64,
}

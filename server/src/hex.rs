//! Bytes as lowercase hexadecimal: how the tokens file writes a token's
//! hash, the link secret's file its secret, and notifications their
//! endpoint keys and signatures.

/// `bytes` as lowercase hex digits, two per byte.
pub(crate) fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `N` bytes `text` spells in exactly `2 * N` hex digits (either
/// case); `None` for anything else.
pub(crate) fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    // Hex digits only: `from_str_radix` alone would also take a sign
    // (`"+f"` is 15).
    if text.len() != N * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0_u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[index * 2..index * 2 + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_bad_text_is_refused() {
        let bytes = [0_u8, 1, 0xab, 0xff];
        assert_eq!(encode(&bytes), "0001abff");
        assert_eq!(decode::<4>("0001abff"), Some(bytes));
        assert_eq!(decode::<4>("0001ABFF"), Some(bytes));
        for bad in [
            "0001abf",
            "0001abff00",
            "0001abfg",
            "00é1abf",
            "+f01abff",
            "00+1abff",
        ] {
            assert_eq!(decode::<4>(bad), None, "{bad}");
        }
    }
}

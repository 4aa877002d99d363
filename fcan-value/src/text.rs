//! Printing text that came from the bus.
//!
//! A node's schema blob, its announced names and the reasons built from them (a
//! validation error quotes the offending name as it was) are chosen by whoever programmed
//! the node. Printed raw, an `ESC [ 2 J` clears the user's screen, a `\r` overwrites what
//! the line said, and a bidi override (U+202E) shows `evil.txt` as something else. Every
//! human output that embeds such text goes through [`Untrusted`] (or [`escape`]), which
//! writes control characters (C0, DEL, C1: escape sequences start with one of them) and
//! the Unicode bidi controls as `\u{…}` and everything else as it is. JSON output goes
//! through [`json_safe`].

use std::borrow::Cow;
use std::fmt;

/// Whether `c` must not reach a terminal raw: a control character (C0 `U+0000–001F`,
/// DEL `U+007F`, C1 `U+0080–009F`) or a bidi control (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// Displays a string from the bus with every [unsafe](is_unsafe) character written as
/// `\u{…}` (so `\x1b[2J` prints as `\u{1b}[2J`); all other text, non-ASCII included, is
/// written unchanged.
#[derive(Clone, Copy, Debug)]
pub struct Untrusted<'a>(pub &'a str);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so `{:<20}` aligns it like a plain `&str`.
        f.pad(&escape(self.0))
    }
}

/// `s` with every [unsafe](is_unsafe) character written as `\u{…}`, as [`Untrusted`]
/// displays it; borrowed when there is nothing to escape.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.contains(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A JSON text with the characters `serde_json` leaves raw but a terminal acts on (DEL,
/// C1 controls, bidi controls) written as `\uXXXX` escapes. They can only occur inside
/// JSON strings, where the escape means the same character: a JSON reader gets the same
/// value, a terminal shows it inert. (`serde_json` already escapes C0 controls.)
pub fn json_safe(json: String) -> String {
    if !json.contains(is_unsafe) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_only() {
        let s = "a\x1b[2J\rb\u{202E}c\u{2066}d\u{7f}\u{9b}é中";
        let e = escape(s);
        assert_eq!(e, "a\\u{1b}[2J\\u{d}b\\u{202e}c\\u{2066}d\\u{7f}\\u{9b}é中");
        assert!(!e.contains(is_unsafe));
        assert!(matches!(escape("motor_driver1"), Cow::Borrowed(_)));
    }

    #[test]
    fn padding_applies_as_for_str() {
        assert_eq!(format!("[{:<6}]", Untrusted("ab")), "[ab    ]");
        assert_eq!(format!("[{:<8}]", Untrusted("a\r")), "[a\\u{d}  ]");
    }

    #[test]
    fn json_keeps_its_value() {
        let v = serde_json::json!({"name": "x\u{202E}y\u{7f}\u{85}\u{1b}"});
        let text = json_safe(v.to_string());
        assert!(!text.contains(is_unsafe), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}

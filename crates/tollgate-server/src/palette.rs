//! The colours tollgate draws with, in `simulate --plot` and on the status
//! page: Okabe and Ito's palette, whose colours stay apart under the common
//! colour-vision deficiencies. Admitted is always blue and denied always
//! vermillion.

/// A colour as red, green, blue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rgb(pub(crate) u8, pub(crate) u8, pub(crate) u8);

impl Rgb {
    /// `#rrggbb`, for CSS.
    pub(crate) fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// Requests a policy admitted.
pub(crate) const ADMITTED: Rgb = Rgb(0x00, 0x72, 0xb2);
/// Requests a policy denied.
pub(crate) const DENIED: Rgb = Rgb(0xd5, 0x5e, 0x00);
/// Requests offered, before any policy.
pub(crate) const OFFERED: Rgb = Rgb(0xbb, 0xbb, 0xbb);
/// Policies side by side (`--compare`): blue, orange, bluish green,
/// reddish purple, sky blue, vermillion, then black.
pub(crate) const SERIES: [Rgb; 7] = [
    ADMITTED,
    Rgb(0xe6, 0x9f, 0x00),
    Rgb(0x00, 0x9e, 0x73),
    Rgb(0xcc, 0x79, 0xa7),
    Rgb(0x56, 0xb4, 0xe9),
    DENIED,
    Rgb(0x00, 0x00, 0x00),
];

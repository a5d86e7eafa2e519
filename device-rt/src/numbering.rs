//! Host↔device enums travel as plain numbers; [`numbering!`] gives each one the list of
//! its values and the checked conversion back from a number, written once.

/// Implements `ALL` (every value, in numbering order) and `$from(v) -> Option<Self>` (the
/// value numbered `v`, if any) for a fieldless `#[repr($repr)]` enum.
macro_rules! numbering {
    ($name:ident, $repr:ty, $from:ident, [$($variant:ident),+ $(,)?]) => {
        impl $name {
            /// Every value, in numbering order.
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];

            /// The value numbered `v`, if any.
            pub fn $from(v: $repr) -> Option<Self> {
                Self::ALL.into_iter().find(|x| *x as $repr == v)
            }
        }
    };
}

//! How fixed-size records are encoded, declared once per record.
//!
//! [`record!`] declares a record's fields in the order they are written: it generates the
//! struct, its `SIZE`, `to_bytes` and `from_bytes`, each field at the offset the fields before
//! it add up to, and a compile-time check that they add up to the declared size. Reserved
//! bytes (written as zeros, ignored when read) are declared where they sit, as `_: [u8; N]`.
//! [`u16_enum!`] and [`u8_enum!`] declare an enum and the number that stands for each variant
//! once; the fields of records use them through [`Field`].

/// A value with a fixed little-endian encoding of [`Field::SIZE`] bytes.
pub(crate) trait Field: Sized {
    /// Encoded size, bytes.
    const SIZE: usize;
    /// Writes the value into `b` (exactly `SIZE` bytes).
    fn put(&self, b: &mut [u8]);
    /// Reads the value from `b` (exactly `SIZE` bytes).
    fn get(b: &[u8]) -> Self;
}

macro_rules! int_fields {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn put(&self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}

int_fields!(u8, u16, u32, i32, u64);

/// One byte: 1 for true, 0 for false; any byte but 0 reads as true.
impl Field for bool {
    const SIZE: usize = 1;
    #[inline]
    fn put(&self, b: &mut [u8]) {
        b[0] = u8::from(*self);
    }
    #[inline]
    fn get(b: &[u8]) -> Self {
        b[0] != 0
    }
}

/// The elements one after another.
impl<T: Field + Copy + Default, const N: usize> Field for [T; N] {
    const SIZE: usize = T::SIZE * N;
    fn put(&self, b: &mut [u8]) {
        for (i, v) in self.iter().enumerate() {
            v.put(&mut b[i * T::SIZE..(i + 1) * T::SIZE]);
        }
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [T::default(); N];
        for (i, v) in a.iter_mut().enumerate() {
            *v = T::get(&b[i * T::SIZE..(i + 1) * T::SIZE]);
        }
        a
    }
}

/// Declares a fixed-size record: the struct, `SIZE`, `to_bytes`, `from_bytes`, a [`Field`]
/// implementation (a record can be a field of another) and a compile-time check of the size.
///
/// ```text
/// record! {
///     /// Doc.
///     #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
///     pub struct Name: 16 bytes {
///         /// Doc.
///         pub a: u64,
///         pub b: u32,
///         _: [u8; 4],
///     }
/// }
/// ```
///
/// Fields are written in the order declared, each right after the one before; `_: [u8; N]`
/// declares N reserved bytes. The field types must implement [`Field`].
macro_rules! record {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident: $size:literal bytes { $($body:tt)* }
    ) => {
        $crate::codec::record!(@munch [$(#[$meta])* $vis $name $size] [] [] [] $($body)*);
    };
    // Reserved bytes.
    (@munch $head:tt [$($fields:tt)*] [$($names:ident)*] [$($wire:tt)*]
        $(#[$fmeta:meta])* _: [u8; $n:literal] $(, $($rest:tt)*)?
    ) => {
        $crate::codec::record!(@munch $head [$($fields)*] [$($names)*]
            [$($wire)* (reserved $n)] $($($rest)*)?);
    };
    // A field.
    (@munch $head:tt [$($fields:tt)*] [$($names:ident)*] [$($wire:tt)*]
        $(#[$fmeta:meta])* pub $field:ident: $t:ty $(, $($rest:tt)*)?
    ) => {
        $crate::codec::record!(@munch $head [$($fields)* $(#[$fmeta])* pub $field: $t,]
            [$($names)* $field] [$($wire)* (field $field $t)] $($($rest)*)?);
    };
    // Everything read: the struct and its codec.
    (@munch [$(#[$meta:meta])* $vis:vis $name:ident $size:literal] [$($fields:tt)*]
        [$($names:ident)*] [$($wire:tt)*]
    ) => {
        $(#[$meta])*
        $vis struct $name { $($fields)* }

        impl $name {
            /// Encoded size, bytes.
            pub const SIZE: usize = $size;

            /// The record's encoding: its fields in declaration order, little-endian.
            /// (`#[inline]`: the library's hot path encodes a record per call, from another
            /// crate, and its worker decodes and encodes one per GPU record.)
            #[inline]
            pub fn to_bytes(&self) -> [u8; Self::SIZE] {
                let mut b = [0u8; Self::SIZE];
                $crate::codec::record!(@put self b 0usize; $($wire)*);
                b
            }

            /// Decodes what [`Self::to_bytes`] wrote (reserved bytes are ignored).
            #[inline]
            pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
                $crate::codec::record!(@get b 0usize; $($wire)*);
                $name { $($names),* }
            }
        }

        const _: () = assert!(
            $crate::codec::record!(@end 0usize; $($wire)*) == $size,
            concat!("the fields of ", stringify!($name), " do not add up to ", stringify!($size), " bytes")
        );

        impl $crate::codec::Field for $name {
            const SIZE: usize = $size;
            #[inline]
            fn put(&self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_bytes());
            }
            #[inline]
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; $size];
                a.copy_from_slice(b);
                Self::from_bytes(&a)
            }
        }
    };
    (@put $self:ident $b:ident $at:expr; (field $field:ident $t:ty) $($rest:tt)*) => {
        <$t as $crate::codec::Field>::put(
            &$self.$field,
            &mut $b[$at..$at + <$t as $crate::codec::Field>::SIZE],
        );
        $crate::codec::record!(@put $self $b $at + <$t as $crate::codec::Field>::SIZE; $($rest)*);
    };
    (@put $self:ident $b:ident $at:expr; (reserved $n:literal) $($rest:tt)*) => {
        $crate::codec::record!(@put $self $b $at + $n; $($rest)*);
    };
    (@put $self:ident $b:ident $at:expr;) => {};
    (@get $b:ident $at:expr; (field $field:ident $t:ty) $($rest:tt)*) => {
        let $field = <$t as $crate::codec::Field>::get(
            &$b[$at..$at + <$t as $crate::codec::Field>::SIZE],
        );
        $crate::codec::record!(@get $b $at + <$t as $crate::codec::Field>::SIZE; $($rest)*);
    };
    (@get $b:ident $at:expr; (reserved $n:literal) $($rest:tt)*) => {
        $crate::codec::record!(@get $b $at + $n; $($rest)*);
    };
    (@get $b:ident $at:expr;) => {};
    (@end $at:expr; (field $field:ident $t:ty) $($rest:tt)*) => {
        $crate::codec::record!(@end $at + <$t as $crate::codec::Field>::SIZE; $($rest)*)
    };
    (@end $at:expr; (reserved $n:literal) $($rest:tt)*) => {
        $crate::codec::record!(@end $at + $n; $($rest)*)
    };
    (@end $at:expr;) => {
        $at
    };
}
pub(crate) use record;

/// Declares an enum stored as a `u16`, each variant with its number, and a last variant that
/// carries numbers this reader does not know: `to_u16`, `from_u16` and a [`Field`]
/// implementation.
///
/// ```text
/// u16_enum! {
///     /// Doc.
///     pub enum Name {
///         /// Doc.
///         First = 1,
///         Second = 2,
///     }
///     /// Doc of the variant for other numbers.
///     Unknown(u16)
/// }
/// ```
macro_rules! u16_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $value:literal),* $(,)?
        }
        $(#[$umeta:meta])*
        $unknown:ident(u16)
    ) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            $(#[$umeta])*
            $unknown(u16),
        }

        impl $name {
            /// The number that stands for this variant.
            pub fn to_u16(self) -> u16 {
                match self {
                    $($name::$variant => $value,)*
                    $name::$unknown(v) => v,
                }
            }

            /// The variant `v` stands for.
            pub fn from_u16(v: u16) -> Self {
                match v {
                    $($value => $name::$variant,)*
                    v => $name::$unknown(v),
                }
            }
        }

        impl $crate::codec::Field for $name {
            const SIZE: usize = 2;
            fn put(&self, b: &mut [u8]) {
                <u16 as $crate::codec::Field>::put(&self.to_u16(), b);
            }
            fn get(b: &[u8]) -> Self {
                Self::from_u16(<u16 as $crate::codec::Field>::get(b))
            }
        }
    };
}
pub(crate) use u16_enum;

/// Declares a `#[repr(u8)]` enum, each variant with its number and name, once: `from_u8`
/// (numbers not listed read as the `#[default]` variant), `name` and a [`Field`]
/// implementation.
///
/// ```text
/// u8_enum! {
///     /// Doc.
///     #[derive(Clone, Copy, Default)]
///     pub enum Name {
///         #[default]
///         Unknown = 0 => "unknown",
///         First = 1 => "first",
///     }
/// }
/// ```
macro_rules! u8_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $value:literal => $text:literal),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            /// The variant `v` stands for; the default one for numbers not listed.
            pub fn from_u8(v: u8) -> Self {
                match v {
                    $($value => $name::$variant,)*
                    _ => $name::default(),
                }
            }

            /// The variant's name, as reports print it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl $crate::codec::Field for $name {
            const SIZE: usize = 1;
            fn put(&self, b: &mut [u8]) {
                b[0] = *self as u8;
            }
            fn get(b: &[u8]) -> Self {
                Self::from_u8(b[0])
            }
        }
    };
}
pub(crate) use u8_enum;

#[cfg(test)]
mod tests {
    u16_enum! {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub enum Shape {
            #[default]
            Round = 1,
            Square = 7,
        }
        Other(u16)
    }

    u8_enum! {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub enum Colour {
            #[default]
            None = 0 => "none",
            Red = 3 => "red",
        }
    }

    record! {
        #[derive(Debug, PartialEq, Eq)]
        struct Sample: 24 bytes {
            pub shape: Shape,
            pub colour: Colour,
            _: [u8; 1],
            pub dims: [i32; 2],
            pub on: bool,
            _: [u8; 3],
            pub size: u64,
        }
    }

    #[test]
    fn fields_follow_one_another_and_reserved_bytes_stay_zero() {
        let s = Sample {
            shape: Shape::Square,
            colour: Colour::Red,
            dims: [-2, 5],
            on: true,
            size: 0x0102_0304_0506_0708,
        };
        let b = s.to_bytes();
        assert_eq!(
            b,
            [7, 0, 3, 0, 0xfe, 0xff, 0xff, 0xff, 5, 0, 0, 0, 1, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1]
        );
        assert_eq!(Sample::from_bytes(&b), s);
        let mut noisy = b;
        noisy[3] = 0xaa;
        noisy[13..16].copy_from_slice(&[1, 2, 3]);
        assert_eq!(Sample::from_bytes(&noisy), s);
        noisy[2] = 9;
        noisy[12] = 2;
        let odd = Sample::from_bytes(&noisy);
        assert_eq!((odd.colour, odd.on), (Colour::None, true));
        assert_eq!(Shape::from_u16(9), Shape::Other(9));
        assert_eq!(Shape::Other(9).to_u16(), 9);
        assert_eq!(Colour::from_u8(3).name(), "red");
    }
}

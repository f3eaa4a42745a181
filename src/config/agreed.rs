//! What every rank of a job must have resolved alike, derived from the
//! configuration's own type: one term per field of a `Serialize` struct,
//! in declaration order, named as serde names it and valued by its JSON.
//! A new field is therefore agreed on unless it says otherwise: a field
//! that may differ from rank to rank is marked `#[serde(skip)]` where it
//! is declared, with the reason beside it.
//!
//! Only the top level is split into terms: a field holding a struct is
//! one term (its JSON), so a message names the option, not a part of it.

use crate::comm::Terms;
use serde::Serialize;
use serde::ser::{self, Impossible, SerializeStruct, Serializer};
use std::fmt;

/// The terms of `value`, a struct: `(field name, field's JSON)` per
/// serialised field, in declaration order. A field whose value cannot be
/// encoded as JSON is given its encoder's error instead, so it still
/// takes part; the fields of himeno's configurations all encode (paths
/// through [`debug`]).
pub fn terms<T: Serialize>(value: &T) -> Terms {
    let mut terms = Terms::new();
    value
        .serialize(Fields { terms: &mut terms })
        .expect("an agreed configuration is a struct");
    terms
}

/// `serialize_with` for a field serde cannot encode losslessly (a path
/// that is not UTF-8): its `Debug` text, escapes included.
pub fn debug<T: fmt::Debug, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{value:?}"))
}

/// The serializer that collects a struct's fields as terms.
struct Fields<'a> {
    terms: &'a mut Terms,
}

/// Anything but a struct handed to [`terms`].
#[derive(Debug)]
struct NotAStruct(String);

impl fmt::Display for NotAStruct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "agreed terms come from a struct: {}", self.0)
    }
}

impl std::error::Error for NotAStruct {}

impl ser::Error for NotAStruct {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        NotAStruct(msg.to_string())
    }
}

impl SerializeStruct for Fields<'_> {
    type Ok = ();
    type Error = NotAStruct;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), NotAStruct> {
        let json = serde_json::to_string(value).unwrap_or_else(|e| format!("unencodable: {e}"));
        self.terms.push((key, json));
        Ok(())
    }

    fn end(self) -> Result<(), NotAStruct> {
        Ok(())
    }
}

/// The methods of [`Serializer`] for everything that is not a struct.
macro_rules! refuse {
    ($($name:ident($($arg:ty),*);)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<(), NotAStruct> {
            Err(NotAStruct(stringify!($name).into()))
        })*
    };
}

impl<'a> Serializer for Fields<'a> {
    type Ok = ();
    type Error = NotAStruct;
    type SerializeSeq = Impossible<(), NotAStruct>;
    type SerializeTuple = Impossible<(), NotAStruct>;
    type SerializeTupleStruct = Impossible<(), NotAStruct>;
    type SerializeTupleVariant = Impossible<(), NotAStruct>;
    type SerializeMap = Impossible<(), NotAStruct>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Impossible<(), NotAStruct>;

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), NotAStruct> {
        Err(NotAStruct("an option".into()))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), NotAStruct> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), NotAStruct> {
        Err(NotAStruct("an enum".into()))
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotAStruct> {
        Err(NotAStruct("a sequence".into()))
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotAStruct> {
        Err(NotAStruct("a tuple".into()))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotAStruct> {
        Err(NotAStruct("a tuple struct".into()))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotAStruct> {
        Err(NotAStruct("an enum".into()))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotAStruct> {
        Err(NotAStruct("a map (a flattened field)".into()))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields<'a>, NotAStruct> {
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotAStruct> {
        Err(NotAStruct("an enum".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[derive(Serialize)]
    struct Options {
        #[serde(rename = "run length")]
        length: u64,
        #[serde(skip)]
        #[allow(dead_code)]
        threads: usize,
        #[serde(serialize_with = "debug")]
        file: Option<PathBuf>,
        label: Option<String>,
    }

    /// Every field not skipped is a term, in order, under its serde name;
    /// a path that is not UTF-8 is still told apart.
    #[test]
    fn every_field_but_a_skipped_one_is_a_term() {
        use std::os::unix::ffi::OsStringExt;
        let options = |file: Vec<u8>| Options {
            length: 5,
            threads: 3,
            file: Some(PathBuf::from(std::ffi::OsString::from_vec(file))),
            label: None,
        };
        let t = terms(&options(b"a\xff".to_vec()));
        let names: Vec<&str> = t.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["run length", "file", "label"]);
        assert_eq!(t[0].1, "5");
        assert_eq!(t[2].1, "null");
        assert_ne!(t[1], terms(&options(b"a\xfe".to_vec()))[1]);
    }

    #[test]
    #[should_panic(expected = "a struct")]
    fn only_a_struct_has_terms() {
        terms(&7u64);
    }
}

//! A JSON append body, `{"records": [...]}`, parsed in one pass into
//! [`Record`]s without a `serde_json::Value` tree.
//!
//! Values and keys without escapes are slices of the request body (no copy);
//! the only per-record memory is the [`Incoming`] itself. Every record
//! counts [`RECORD_OVERHEAD`] bytes against `--max-request-bytes`, so a
//! body of tiny records cannot turn 8 MiB into hundreds of MiB of structs:
//! past `max_request_bytes / RECORD_OVERHEAD` records the request is 413.
//!
//! Errors name the record and field (`records[3].value: ...`), as the
//! tree-walking parser before this one did; the serde visitors leave the
//! precise error in the parse context and abort with a placeholder.

use super::encoding::{Encoding, B64};
use super::error::HttpError;
use super::topics::json_error;
use crate::api::ErrorCode;
use crate::batch::Record;
use axum::body::Bytes;
use base64::Engine as _;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

/// Bytes each record of a JSON append counts against `--max-request-bytes`
/// on top of the body: about what it costs in memory while the request is
/// placed and appended (the record and its place in a partition's batch).
pub const RECORD_OVERHEAD: usize = 64;

/// One record of a request, validated but not yet placed.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub partition: Option<u32>,
    pub record: Record,
}

/// What a JSON append is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub max_record_bytes: usize,
    pub max_request_bytes: usize,
}

impl BodyLimits {
    /// Most records one request may hold.
    pub fn max_records(&self) -> usize {
        (self.max_request_bytes / RECORD_OVERHEAD).max(1)
    }
}

fn invalid(msg: String) -> HttpError {
    HttpError::new(ErrorCode::InvalidRequest, msg)
}

struct Ctx<'b> {
    body: &'b Bytes,
    enc: Encoding,
    timestamp_ms: i64,
    limits: BodyLimits,
    /// The precise error a visitor refused the body with.
    error: RefCell<Option<HttpError>>,
}

impl Ctx<'_> {
    fn fail<E: de::Error>(&self, e: HttpError) -> E {
        self.error.borrow_mut().get_or_insert(e);
        E::custom("refused")
    }

    /// A string of the body as bytes: a slice of the body when serde could
    /// borrow it, else its own copy; base64 decoded when asked for.
    fn bytes(&self, s: Cow<'_, str>, what: &dyn Fn() -> String) -> Result<Bytes, HttpError> {
        match self.enc {
            Encoding::Utf8 => Ok(match s {
                Cow::Borrowed(b) => self.body.slice_ref(b.as_bytes()),
                Cow::Owned(o) => Bytes::from(o.into_bytes()),
            }),
            Encoding::Base64 => B64
                .decode(s.as_bytes())
                .map(Bytes::from)
                .map_err(|e| invalid(format!("{}: invalid base64: {e}", what()))),
        }
    }
}

/// A JSON value seen only as deep as an append needs: strings and numbers
/// kept, arrays and objects skipped (and named in errors).
enum Shallow<'a> {
    Null,
    Bool,
    Number(serde_json::Number),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl Shallow<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Shallow::Null => "null",
            Shallow::Bool => "a boolean",
            Shallow::Number(_) => "a number",
            Shallow::Str(_) => "a string",
            Shallow::Array => "an array",
            Shallow::Object => "an object",
        }
    }
}

struct ShallowVisitor;

impl<'de> Visitor<'de> for ShallowVisitor {
    type Value = Shallow<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shallow::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Shallow::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Shallow::Bool)
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Shallow::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Shallow::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Shallow::Number(
            serde_json::Number::from_f64(v).unwrap_or_else(|| 0.into()),
        ))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Shallow::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Shallow::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Shallow::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Shallow::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Shallow::Object)
    }
}

impl<'de> de::Deserialize<'de> for Shallow<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShallowVisitor)
    }
}

/// An object key, borrowed from the body when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The body: an object with only `records`.
struct Top<'c, 'b>(&'c Ctx<'b>);

impl<'de, 'c, 'b> Visitor<'de> for Top<'c, 'b> {
    type Value = Option<Vec<Incoming>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object {\"records\": [...]}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut records = None;
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            if k != "records" {
                return Err(self.0.fail(invalid(format!(
                    "unknown field {k:?} in body; expected only \"records\""
                ))));
            }
            records = Some(map.next_value_seed(Records(self.0))?);
        }
        Ok(records)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.0.fail(not_an_object("an array")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("null")))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("a boolean")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("a number")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("a number")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("a number")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_object("a string")))
    }
}

fn not_an_object(got: &str) -> HttpError {
    invalid(format!("body must be an object {{\"records\": [...]}}, got {got}"))
}

impl<'de> DeserializeSeed<'de> for Top<'_, '_> {
    type Value = Option<Vec<Incoming>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// The `records` array.
struct Records<'c, 'b>(&'c Ctx<'b>);

impl<'de> DeserializeSeed<'de> for Records<'_, '_> {
    type Value = Vec<Incoming>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Records<'_, '_> {
    type Value = Vec<Incoming>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let ctx = self.0;
        let max = ctx.limits.max_records();
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(max));
        loop {
            let i = out.len();
            let Some(r) = seq.next_element_seed(RecordSeed { ctx, i })? else {
                break;
            };
            if i >= max {
                return Err(ctx.fail(HttpError::new(
                    ErrorCode::RequestTooLarge,
                    format!(
                        "the request has more than {max} records: each record counts {RECORD_OVERHEAD} bytes \
                         against --max-request-bytes ({}); send fewer records per request",
                        ctx.limits.max_request_bytes
                    ),
                )));
            }
            out.push(r);
        }
        Ok(out)
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.0.fail(not_an_array("an object")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("null")))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("a boolean")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("a number")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("a number")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("a number")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.0.fail(not_an_array("a string")))
    }
}

fn not_an_array(got: &str) -> HttpError {
    invalid(format!("\"records\" must be an array, got {got}"))
}

/// `records[i]`.
struct RecordSeed<'c, 'b> {
    ctx: &'c Ctx<'b>,
    i: usize,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_, '_> {
    type Value = Incoming;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let ctx = self.ctx;
        match d.deserialize_any(self)? {
            Ok(r) => Ok(r),
            Err(e) => Err(ctx.fail(e)),
        }
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_, '_> {
    type Value = Result<Incoming, HttpError>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a record object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (ctx, i) = (self.ctx, self.i);
        let mut f = Fields::default();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            match &*k {
                "key" => f.key = Some(map.next_value::<Shallow<'de>>()?),
                "value" => f.value = Some(map.next_value::<Shallow<'de>>()?),
                "partition" => f.partition = Some(map.next_value::<Shallow<'de>>()?),
                "timestamp" => f.timestamp = Some(map.next_value::<Shallow<'de>>()?),
                "headers" => f.headers = Some(map.next_value::<Headers<'de>>()?),
                _ => {
                    return Err(ctx.fail(invalid(format!(
                        "records[{i}]: unknown field {k:?}; expected key, value, headers, timestamp, partition"
                    ))))
                }
            }
        }
        Ok(build(ctx, i, f))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Ok(Err(self.not_an_object("an array")))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("null")))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("a boolean")))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("a number")))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("a number")))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("a number")))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(self.not_an_object("a string")))
    }
}

impl RecordSeed<'_, '_> {
    fn not_an_object(&self, got: &str) -> HttpError {
        invalid(format!("records[{}] must be an object, got {got}", self.i))
    }
}

/// The fields of one record object, as sent.
#[derive(Default)]
struct Fields<'a> {
    key: Option<Shallow<'a>>,
    value: Option<Shallow<'a>>,
    headers: Option<Headers<'a>>,
    timestamp: Option<Shallow<'a>>,
    partition: Option<Shallow<'a>>,
}

/// A record's `headers`: an object or a list of `[name, value]` pairs (the
/// values seen shallowly), or whatever else was sent, by type name.
enum Headers<'a> {
    Null,
    Map(Vec<(Cow<'a, str>, Shallow<'a>)>),
    /// Every header in order, repeated names kept.
    List(Vec<(Cow<'a, str>, Shallow<'a>)>),
    /// The list's element `.0` is not a `[name, value]` pair.
    BadPair(usize),
    Other(&'static str),
}

/// One `[name, value]` element of the list form, or `None` for anything else.
struct Pair<'a>(Option<(Cow<'a, str>, Shallow<'a>)>);

impl<'de> de::Deserialize<'de> for Pair<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PairVisitor)
    }
}

struct PairVisitor;

impl<'de> Visitor<'de> for PairVisitor {
    type Value = Pair<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a [name, value] pair")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let name = seq.next_element::<Shallow<'de>>()?;
        let value = seq.next_element::<Shallow<'de>>()?;
        let mut extra = false;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            extra = true;
        }
        Ok(Pair(match (name, value, extra) {
            (Some(Shallow::Str(n)), Some(v), false) => Some((n, v)),
            _ => None,
        }))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Pair(None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Pair(None))
    }
}

impl<'de> de::Deserialize<'de> for Headers<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Headers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, Shallow<'de>>()? {
                    out.push((k, v));
                }
                Ok(Headers::Map(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                let mut bad = None;
                while let Some(Pair(p)) = seq.next_element::<Pair<'de>>()? {
                    match p {
                        Some(p) if bad.is_none() => out.push(p),
                        Some(_) => {}
                        None => {
                            bad.get_or_insert(out.len());
                        }
                    }
                }
                Ok(bad.map_or(Headers::List(out), Headers::BadPair))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Headers::Null)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Headers::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Headers::Other("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Headers::Other("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Headers::Other("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Headers::Other("a number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Headers::Other("a string"))
            }
        }
        d.deserialize_any(V)
    }
}

/// `Some(bytes)` for a string, `None` for null or absent.
fn optional_bytes(
    ctx: &Ctx<'_>,
    v: Option<Shallow<'_>>,
    what: &dyn Fn() -> String,
) -> Result<Option<Bytes>, HttpError> {
    match v {
        None | Some(Shallow::Null) => Ok(None),
        Some(Shallow::Str(s)) => ctx.bytes(s, what).map(Some),
        Some(other) => Err(invalid(format!(
            "{}: expected a string or null, got {}",
            what(),
            other.type_name()
        ))),
    }
}

/// `timestamp`: milliseconds since the Unix epoch, 0 or more; absent or
/// null means the time the request arrived.
fn timestamp(ctx: &Ctx<'_>, i: usize, v: Option<Shallow<'_>>) -> Result<i64, HttpError> {
    match v {
        None | Some(Shallow::Null) => Ok(ctx.timestamp_ms),
        Some(Shallow::Number(n)) => match n.as_i64().filter(|t| *t >= 0) {
            Some(t) => Ok(t),
            None => Err(invalid(format!(
                "records[{i}].timestamp: expected milliseconds since the Unix epoch (an integer, 0 or more), got {n}"
            ))),
        },
        Some(other) => Err(invalid(format!(
            "records[{i}].timestamp: expected an integer, got {}",
            other.type_name()
        ))),
    }
}

/// The headers as stored: the list form as sent; the object form sorted
/// by name, the last of a repeated name winning (as a JSON object read
/// whole would have them).
fn headers(ctx: &Ctx<'_>, i: usize, headers: Option<Headers<'_>>) -> Result<Vec<(String, Option<Bytes>)>, HttpError> {
    Ok(match headers {
        None | Some(Headers::Null) => Vec::new(),
        Some(Headers::List(h)) => {
            let mut out = Vec::with_capacity(h.len());
            for (j, (name, v)) in h.into_iter().enumerate() {
                let v = optional_bytes(ctx, Some(v), &|| format!("records[{i}].headers[{j}]"))?;
                out.push((name.into_owned(), v));
            }
            out
        }
        Some(Headers::Map(mut h)) => {
            h.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out: Vec<(String, Option<Bytes>)> = Vec::with_capacity(h.len());
            for (name, v) in h {
                let v = optional_bytes(ctx, Some(v), &|| format!("records[{i}].headers.{name}"))?;
                match out.last_mut() {
                    Some(last) if last.0 == *name => last.1 = v,
                    _ => out.push((name.into_owned(), v)),
                }
            }
            out
        }
        Some(Headers::BadPair(j)) => {
            return Err(invalid(format!(
                "records[{i}].headers[{j}]: expected a [name, value] pair (a string and a string or null)"
            )))
        }
        Some(Headers::Other(t)) => {
            return Err(invalid(format!(
                "records[{i}].headers: expected an object of strings or a list of [name, value] pairs, got {t}"
            )))
        }
    })
}

fn build(ctx: &Ctx<'_>, i: usize, f: Fields<'_>) -> Result<Incoming, HttpError> {
    let Fields {
        key,
        value,
        headers: sent_headers,
        timestamp: sent_timestamp,
        partition,
    } = f;
    let key = optional_bytes(ctx, key, &|| format!("records[{i}].key"))?;
    let Some(value) = value else {
        return Err(invalid(format!(
            "records[{i}]: missing field \"value\" (use null for a tombstone)"
        )));
    };
    let value = optional_bytes(ctx, Some(value), &|| format!("records[{i}].value"))?;
    let headers = headers(ctx, i, sent_headers)?;
    let timestamp_ms = timestamp(ctx, i, sent_timestamp)?;
    let partition = match partition {
        None | Some(Shallow::Null) => None,
        Some(Shallow::Number(n)) => match n.as_u64().and_then(|p| u32::try_from(p).ok()) {
            Some(p) => Some(p),
            None => {
                return Err(invalid(format!(
                    "records[{i}].partition: expected a partition number, got {n}"
                )))
            }
        },
        Some(other) => {
            return Err(invalid(format!(
                "records[{i}].partition: expected a partition number, got {}",
                other.type_name()
            )))
        }
    };
    let record = Record {
        timestamp_ms,
        key,
        value,
        headers,
    };
    check_size(&record, ctx.limits.max_record_bytes, &format!("records[{i}]"))?;
    Ok(Incoming { partition, record })
}

pub(crate) fn check_size(record: &Record, max: usize, what: &str) -> Result<(), HttpError> {
    let size = crate::stream::partition::record_size(record);
    if size > max {
        return Err(HttpError::new(
            ErrorCode::RecordTooLarge,
            format!("{what} is {size} bytes (key + value + headers); the limit is {max}"),
        ));
    }
    Ok(())
}

/// Parses and checks a JSON append body: `{"records": [...]}`.
pub(crate) fn parse_json(
    body: &Bytes,
    enc: Encoding,
    timestamp_ms: i64,
    limits: BodyLimits,
) -> Result<Vec<Incoming>, HttpError> {
    let ctx = Ctx {
        body,
        enc,
        timestamp_ms,
        limits,
        error: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(&body[..]);
    let parsed = Top(&ctx).deserialize(&mut de).and_then(|r| de.end().map(|()| r));
    if let Some(e) = ctx.error.into_inner() {
        return Err(e);
    }
    match parsed.map_err(json_error)? {
        None => Err(invalid("missing field \"records\"".into())),
        Some(r) if r.is_empty() => Err(invalid("\"records\" is empty; send at least one record".into())),
        Some(r) => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BodyLimits = BodyLimits {
        max_record_bytes: 1024,
        max_request_bytes: 64 * 100,
    };

    fn parse(body: &str) -> Result<Vec<Incoming>, HttpError> {
        parse_json(&Bytes::from(body.to_string()), Encoding::Utf8, 7, LIMITS)
    }

    fn message(body: &str) -> String {
        parse(body).unwrap_err().0.message
    }

    #[test]
    fn values_without_escapes_are_slices_of_the_body() {
        let body = Bytes::from_static(br#"{"records":[{"value":"plain","key":"k\u00e9"}]}"#);
        let r = parse_json(&body, Encoding::Utf8, 7, LIMITS).unwrap();
        let v = r[0].record.value.as_ref().unwrap();
        assert_eq!(&v[..], b"plain");
        let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        assert!(range.contains(&(v.as_ptr() as usize)), "borrowed, not copied");
        assert_eq!(
            r[0].record.key.as_deref(),
            Some("k\u{e9}".as_bytes()),
            "escapes decoded"
        );
        assert_eq!(r[0].record.timestamp_ms, 7);
    }

    #[test]
    fn repeated_header_names_keep_the_last_value_in_name_order() {
        let r = parse(r#"{"records":[{"value":null,"headers":{"b":"1","a":null,"b":"2"}}]}"#).unwrap();
        assert_eq!(
            r[0].record.headers,
            vec![
                ("a".to_string(), None),
                ("b".to_string(), Some(Bytes::from_static(b"2")))
            ]
        );
    }

    #[test]
    fn the_list_form_keeps_every_header_in_order_and_a_timestamp_is_the_clients() {
        let r = parse(
            r#"{"records":[{"value":"v","timestamp":1700000000123,"headers":[["b","1"],["a",null],["b","2"]]}]}"#,
        )
        .unwrap();
        assert_eq!(
            r[0].record.headers,
            vec![
                ("b".to_string(), Some(Bytes::from_static(b"1"))),
                ("a".to_string(), None),
                ("b".to_string(), Some(Bytes::from_static(b"2"))),
            ]
        );
        assert_eq!(r[0].record.timestamp_ms, 1_700_000_000_123);
        let r = parse(r#"{"records":[{"value":"v","timestamp":null,"headers":[]}]}"#).unwrap();
        assert_eq!(r[0].record.timestamp_ms, 7, "no timestamp: the arrival time");
        assert!(r[0].record.headers.is_empty());
        let b64 = parse_json(
            &Bytes::from_static(br#"{"records":[{"value":"dg==","headers":[["h","/w=="]]}]}"#),
            Encoding::Base64,
            7,
            LIMITS,
        )
        .unwrap();
        assert_eq!(
            b64[0].record.headers,
            vec![("h".to_string(), Some(Bytes::from_static(b"\xff")))]
        );
    }

    #[test]
    fn bad_list_headers_and_timestamps_are_refused_naming_them() {
        for (body, needle) in [
            (
                r#"{"records":[{"value":"v","headers":[["a","1"],["b"]]}]}"#,
                "records[0].headers[1]: expected a [name, value] pair",
            ),
            (
                r#"{"records":[{"value":"v","headers":[["a","1","x"]]}]}"#,
                "records[0].headers[0]: expected a [name, value] pair",
            ),
            (
                r#"{"records":[{"value":"v","headers":[[1,"1"]]}]}"#,
                "records[0].headers[0]: expected a [name, value] pair",
            ),
            (
                r#"{"records":[{"value":"v","headers":["a"]}]}"#,
                "records[0].headers[0]: expected a [name, value] pair",
            ),
            (
                r#"{"records":[{"value":"v","headers":[["a",5]]}]}"#,
                "records[0].headers[0]: expected a string or null, got a number",
            ),
            (
                r#"{"records":[{"value":"v","timestamp":-5}]}"#,
                "records[0].timestamp: expected milliseconds",
            ),
            (
                r#"{"records":[{"value":"v","timestamp":1.5}]}"#,
                "records[0].timestamp: expected milliseconds",
            ),
            (
                r#"{"records":[{"value":"v","timestamp":"1"}]}"#,
                "records[0].timestamp: expected an integer, got a string",
            ),
        ] {
            let m = message(body);
            assert!(m.contains(needle), "{body}: {m}");
        }
    }

    #[test]
    fn errors_name_the_record_and_field() {
        for (body, needle) in [
            ("[1]", "body must be an object {\"records\": [...]}, got an array"),
            ("5", "got a number"),
            (r#"{"records":{}}"#, "\"records\" must be an array, got an object"),
            (r#"{"records":[],"x":1}"#, "unknown field \"x\" in body"),
            (
                r#"{"records":[{"value":"a"},7]}"#,
                "records[1] must be an object, got a number",
            ),
            (
                r#"{"records":[{"value":[1,{"a":2}]}]}"#,
                "records[0].value: expected a string or null, got an array",
            ),
            (
                r#"{"records":[{"value":"v","partition":1.5}]}"#,
                "records[0].partition: expected a partition number, got 1.5",
            ),
            (
                r#"{"records":[{"value":"v","partition":4294967296}]}"#,
                "got 4294967296",
            ),
            (
                r#"{"records":[{"value":"v","headers":{"h":{}}}]}"#,
                "records[0].headers.h: expected a string or null, got an object",
            ),
            (
                r#"{"records":[{"value":"v","headers":"h"}]}"#,
                "records[0].headers: expected an object of strings or a list of [name, value] pairs, got a string",
            ),
            (r#"{"records":[{"key":"k"}]}"#, "records[0]: missing field \"value\""),
            (r#"{"records":[{"value":"v","valeu":1}]}"#, "unknown field \"valeu\""),
            ("{}", "missing field \"records\""),
            (r#"{"records":[]}"#, "is empty"),
        ] {
            let m = message(body);
            assert!(m.contains(needle), "{body}: {m}");
        }
        assert_eq!(parse("{\"records\": [").unwrap_err().0.code, ErrorCode::InvalidJson);
        assert_eq!(
            parse(r#"{"records":[{"value":"a"}]} x"#).unwrap_err().0.code,
            ErrorCode::InvalidJson
        );
    }

    #[test]
    fn too_many_records_are_refused_naming_the_limit() {
        let n = LIMITS.max_records();
        let body = |n: usize| format!(r#"{{"records":[{}]}}"#, vec![r#"{"value":null}"#; n].join(","));
        assert_eq!(parse(&body(n)).unwrap().len(), n);
        let e = parse(&body(n + 1)).unwrap_err().0;
        assert_eq!(e.code, ErrorCode::RequestTooLarge);
        assert!(e.message.contains("--max-request-bytes"), "{}", e.message);
    }

    #[test]
    fn base64_is_decoded_and_checked() {
        let r = parse_json(
            &Bytes::from_static(br#"{"records":[{"value":"aGk","key":null}]}"#),
            Encoding::Base64,
            0,
            LIMITS,
        )
        .unwrap();
        assert_eq!(r[0].record.value.as_deref(), Some(&b"hi"[..]));
        let e = parse_json(
            &Bytes::from_static(br#"{"records":[{"value":"!!"}]}"#),
            Encoding::Base64,
            0,
            LIMITS,
        )
        .unwrap_err();
        assert!(
            e.0.message.starts_with("records[0].value: invalid base64"),
            "{}",
            e.0.message
        );
    }
}

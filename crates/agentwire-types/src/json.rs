//! Conversions between `google.protobuf.Struct` / `Value` (used for metadata
//! and data parts) and `serde_json` values, which are what Rust code works
//! with.

use crate::wkt::{ListValue, Struct, Value, value::Kind};

/// Converts a JSON value into a protobuf `Value`.
pub fn to_value(json: serde_json::Value) -> Value {
    let kind = match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.into_iter().map(to_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// Converts a JSON object into a protobuf `Struct`.
pub fn to_struct(map: serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: map.into_iter().map(|(k, v)| (k, to_value(v))).collect(),
    }
}

/// Converts a protobuf `Value` into a JSON value. Whole numbers that fit an
/// `i64` become JSON integers, so `42` stays `42` rather than `42.0`.
pub fn from_value(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(list)) => {
            serde_json::Value::Array(list.values.iter().map(from_value).collect())
        }
        Some(Kind::StructValue(s)) => serde_json::Value::Object(from_struct(s)),
    }
}

/// Converts a protobuf `Struct` into a JSON object.
pub fn from_struct(s: &Struct) -> serde_json::Map<String, serde_json::Value> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), from_value(v)))
        .collect()
}

fn number(n: f64) -> serde_json::Value {
    // Every whole number below 2^53 is exact in an f64 (and in an i64).
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_keeps_integers() {
        let j = json!({"key": "value", "count": 42, "ratio": 0.5, "list": [true, null, "x"]});
        let s = to_struct(j.as_object().unwrap().clone());
        assert_eq!(serde_json::Value::Object(from_struct(&s)), j);
    }

    #[test]
    fn integers_up_to_2_pow_53_stay_integers() {
        // Found by the fuzz tests: 9e15 <= n < 2^53 came back as `n.0`.
        for n in [9_000_000_000_000_000i64, (1 << 53) - 1, -(1 << 53) + 1] {
            assert_eq!(from_value(&to_value(json!(n))), json!(n));
        }
    }
}

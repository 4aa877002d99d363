//! Values as people type them on a command line: JSON, or YAML flow syntax
//! (`{type: 1, value: 0.5}`, `[1, 2]`, `true`, `.nan`).
//!
//! Only the CLI parses YAML: `fcan_master::value::Value::from_json_str` is what a library
//! user gets, so the master carries no YAML parser. Both spellings follow the one number
//! rule of `Value::from_json`, and text that holds no value (a string, `null`) is refused
//! by it alike: YAML is read as JSON then.

use std::sync::Arc;

use fcan_master::value::{Shape, Value, ValueError, WHOLE};
use serde_json::Value as Json;

fn err(path: &str, message: impl Into<String>) -> ValueError {
    ValueError {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Parses user text: JSON, or YAML flow syntax (its fields kept in the order written).
///
/// ```
/// use fcan_cli::parse_value;
/// use fcan_master::value::Value;
/// let v = parse_value("{type: 2, value: 0.5}").unwrap();
/// assert_eq!(v, Value::Struct(vec![("type".into(), Value::UInt(2)), ("value".into(), Value::Float(0.5))]));
/// ```
pub fn parse_value(text: &str) -> Result<Value, ValueError> {
    parse(text, Value::from_json)
}

/// [`parse_value`] for a value meant for `shape`: where the text holds no value (a
/// string, `null`), the error says what the field there takes.
///
/// ```
/// use fcan_cli::parse_value_as;
/// use fcan_core::types::ScalarType;
/// use fcan_master::value::Shape;
/// let e = parse_value_as("x", Shape::Param(ScalarType::F32, None)).unwrap_err();
/// assert_eq!(e.within("md3.motor0.velocity.kp").to_string(),
///            r#"md3.motor0.velocity.kp: expected a number (f32), got the string "x""#);
/// ```
pub fn parse_value_as(text: &str, shape: Shape<'_>) -> Result<Value, ValueError> {
    parse(text, |j| Value::from_json_as(j, shape))
}

/// JSON text through `from_json`; YAML straight into a value (its mapping order kept),
/// and where it holds no value, through `from_json` as JSON for the error, so both
/// spellings are refused alike.
fn parse(
    text: &str,
    from_json: impl Fn(&Json) -> Result<Value, ValueError>,
) -> Result<Value, ValueError> {
    if let Ok(j) = serde_json::from_str::<Json>(text) {
        return from_json(&j);
    }
    let y: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| err(WHOLE, format!("not JSON or YAML: {e}")))?;
    if let Some(v) = value_of(&y) {
        return Ok(v);
    }
    from_json(&from_yaml(&y, WHOLE)?)
}

/// A YAML value as a value, `None` where it holds none (a string, `null`, a field name
/// that is not a string).
fn value_of(y: &serde_yaml_ng::Value) -> Option<Value> {
    use serde_yaml_ng::Value as Y;
    Some(match y {
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => Value::from_number(n.as_u64(), n.as_i64(), n.as_f64()),
        Y::Sequence(s) => Value::Array(s.iter().map(value_of).collect::<Option<_>>()?),
        Y::Mapping(m) => Value::Struct(
            m.iter()
                .map(|(k, v)| Some((Arc::from(k.as_str()?), value_of(v)?)))
                .collect::<Option<_>>()?,
        ),
        Y::Tagged(t) => value_of(&t.value)?,
        Y::String(_) | Y::Null => return None,
    })
}

/// A YAML value as JSON: NaN and the infinities (which JSON lacks) as the strings
/// `.nan`, `.inf`, `-.inf` that `Value::from_json` reads as them.
fn from_yaml(y: &serde_yaml_ng::Value, path: &str) -> Result<Json, ValueError> {
    use serde_yaml_ng::Value as Y;
    Ok(match y {
        Y::Null => Json::Null,
        Y::Bool(b) => Json::Bool(*b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Json::from(u)
            } else if let Some(i) = n.as_i64() {
                Json::from(i)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(n) => Json::Number(n),
                    None if f.is_nan() => Json::from(".nan"),
                    None if f > 0.0 => Json::from(".inf"),
                    None => Json::from("-.inf"),
                }
            }
        }
        Y::String(s) => Json::String(s.clone()),
        Y::Sequence(s) => Json::Array(
            s.iter()
                .enumerate()
                .map(|(i, v)| from_yaml(v, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(m) => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let k = k
                        .as_str()
                        .ok_or_else(|| err(path, "field names must be strings"))?;
                    let at = if path == WHOLE {
                        k.to_string()
                    } else {
                        format!("{path}.{k}")
                    };
                    Ok((k.to_string(), from_yaml(v, &at)?))
                })
                .collect::<Result<_, _>>()?,
        ),
        Y::Tagged(t) => from_yaml(&t.value, path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_special_floats_parse() {
        assert!(matches!(parse_value(".nan").unwrap(), Value::Float(f) if f.is_nan()));
        assert_eq!(
            parse_value("-.inf").unwrap(),
            Value::Float(f64::NEG_INFINITY)
        );
        assert_eq!(
            parse_value("[1, 2]").unwrap(),
            Value::Array(vec![Value::UInt(1), Value::UInt(2)])
        );
        assert_eq!(parse_value("-1").unwrap(), Value::Int(-1));
        // Fields in the order written.
        assert_eq!(
            parse_value("{b: 1, a: 2}").unwrap(),
            Value::Struct(vec![
                ("b".into(), Value::UInt(1)),
                ("a".into(), Value::UInt(2))
            ])
        );
        assert_eq!(
            parse_value("{x: -1e-3}").unwrap().field("x"),
            Some(&Value::Float(-1e-3))
        );
    }

    #[test]
    fn a_string_is_named_where_it_is() {
        let e = parse_value("{type: 1, value: x}").unwrap_err();
        assert_eq!(e.path, "value");
        assert!(e.message.starts_with(r#"got the string "x""#), "{e}");
        let e = parse_value("x").unwrap_err();
        assert_eq!(e.path, WHOLE);
    }
}

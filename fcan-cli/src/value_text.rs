//! Values as people type them on a command line: JSON, or YAML flow syntax
//! (`{type: 1, value: 0.5}`, `[1, 2]`, `true`, `.nan`).
//!
//! Only the CLI parses YAML: `fcan_master::value::Value::from_json_str` is what a library
//! user gets, so the master carries no YAML parser.

use std::sync::Arc;

use fcan_master::value::{Value, ValueError};

fn err(path: &str, message: impl Into<String>) -> ValueError {
    ValueError {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Parses user text: JSON, or YAML flow syntax.
///
/// ```
/// use fcan_cli::parse_value;
/// use fcan_master::value::Value;
/// let v = parse_value("{type: 2, value: 0.5}").unwrap();
/// assert_eq!(v, Value::Struct(vec![("type".into(), Value::UInt(2)), ("value".into(), Value::Float(0.5))]));
/// ```
pub fn parse_value(text: &str) -> Result<Value, ValueError> {
    if let Ok(j) = serde_json::from_str::<serde_json::Value>(text) {
        return Value::from_json(&j);
    }
    let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| err("(value)", format!("not JSON or YAML: {e}")))?;
    from_yaml(&y)
}

fn from_yaml(y: &serde_yaml_ng::Value) -> Result<Value, ValueError> {
    use serde_yaml_ng::Value as Y;
    Ok(match y {
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => Value::from_number(n.as_u64(), n.as_i64(), n.as_f64()),
        Y::Sequence(s) => Value::Array(s.iter().map(from_yaml).collect::<Result<_, _>>()?),
        Y::Mapping(m) => Value::Struct(
            m.iter()
                .map(|(k, v)| {
                    let k = k
                        .as_str()
                        .ok_or_else(|| err("(value)", "field names must be strings"))?;
                    Ok((Arc::from(k), from_yaml(v)?))
                })
                .collect::<Result<_, _>>()?,
        ),
        Y::Tagged(t) => from_yaml(&t.value)?,
        Y::String(s) => {
            return Err(err(
                "(value)",
                format!("strings are not a value type: `{s}`"),
            ))
        }
        Y::Null => return Err(err("(value)", "null is not a value")),
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
    }
}

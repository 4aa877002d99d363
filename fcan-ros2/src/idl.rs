//! ROS 2 interface definitions as data: messages and services, their fields, and the
//! `.msg`/`.srv` text format both ways.
//!
//! Only what the bridge needs from the format: fields of primitive, bounded-string and
//! nested message types, as a single value, a fixed array (`T[3]`), an unbounded
//! sequence (`T[]`) or a bounded one (`T[<=3]`). Constants (`uint8 FOO=1`) are read
//! and dropped (they are not part of a type's hash or its CDR encoding); default values
//! are read and dropped for the same reason. `wstring` and `wchar` are refused: no fcan
//! value maps to them and none of the bundled interfaces uses them.

use std::fmt;

/// A ROS primitive type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Primitive {
    /// `bool`.
    Bool,
    /// `byte` (an octet).
    Byte,
    /// `char` (8 bits).
    Char,
    /// `int8`.
    Int8,
    /// `uint8`.
    UInt8,
    /// `int16`.
    Int16,
    /// `uint16`.
    UInt16,
    /// `int32`.
    Int32,
    /// `uint32`.
    UInt32,
    /// `int64`.
    Int64,
    /// `uint64`.
    UInt64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string` (unbounded).
    String,
}

impl Primitive {
    /// Every primitive with its `.msg` spelling.
    pub const ALL: [(Primitive, &'static str); 14] = [
        (Primitive::Bool, "bool"),
        (Primitive::Byte, "byte"),
        (Primitive::Char, "char"),
        (Primitive::Int8, "int8"),
        (Primitive::UInt8, "uint8"),
        (Primitive::Int16, "int16"),
        (Primitive::UInt16, "uint16"),
        (Primitive::Int32, "int32"),
        (Primitive::UInt32, "uint32"),
        (Primitive::Int64, "int64"),
        (Primitive::UInt64, "uint64"),
        (Primitive::Float32, "float32"),
        (Primitive::Float64, "float64"),
        (Primitive::String, "string"),
    ];

    /// The `.msg` spelling (`float32`).
    pub fn msg_name(self) -> &'static str {
        Primitive::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    fn parse(s: &str) -> Option<Primitive> {
        Primitive::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(p, _)| *p)
    }

    /// Bytes of one value in CDR; `None` for a string.
    pub fn size(self) -> Option<usize> {
        Some(match self {
            Primitive::Bool | Primitive::Byte | Primitive::Char => 1,
            Primitive::Int8 | Primitive::UInt8 => 1,
            Primitive::Int16 | Primitive::UInt16 => 2,
            Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => 4,
            Primitive::Int64 | Primitive::UInt64 | Primitive::Float64 => 8,
            Primitive::String => return None,
        })
    }
}

/// The element type of a field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BaseType {
    /// A primitive (an unbounded `string` included).
    Primitive(Primitive),
    /// `string<=N`.
    BoundedString(u32),
    /// Another message, by its full name (`builtin_interfaces/msg/Duration`).
    Nested(String),
}

/// How many elements a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Shape {
    /// One value: `float32 x`.
    Single,
    /// A fixed array: `float64[9] covariance`.
    Array(u32),
    /// An unbounded sequence: `float64[] positions`.
    Sequence,
    /// A bounded sequence: `float64[<=4] positions`.
    BoundedSequence(u32),
}

/// One field of a message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RosField {
    /// The field name (`snake_case`).
    pub name: String,
    /// The element type.
    pub base: BaseType,
    /// Single value, array or sequence.
    pub shape: Shape,
}

/// A message type: its full name and fields in order.
///
/// A message with no fields is encoded, and hashed, as ROS does it: as if it had one
/// `uint8 structure_needs_at_least_one_member` ([`Message::wire_fields`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    /// `pkg/msg/Name`, or `pkg/srv/Name_Request` / `_Response` for a service's halves.
    pub name: String,
    /// The fields as written.
    pub fields: Vec<RosField>,
}

/// The field ROS puts into a message declared without fields.
pub const EMPTY_MEMBER: &str = "structure_needs_at_least_one_member";

impl Message {
    /// The fields as they are encoded and hashed: the declared ones, or ROS's one dummy
    /// `uint8` for an empty message.
    pub fn wire_fields(&self) -> Vec<RosField> {
        if self.fields.is_empty() {
            vec![RosField {
                name: EMPTY_MEMBER.to_string(),
                base: BaseType::Primitive(Primitive::UInt8),
                shape: Shape::Single,
            }]
        } else {
            self.fields.clone()
        }
    }

    /// The message as `.msg` text: one `type name` line per field, nested types by their
    /// `pkg/Name` short form.
    ///
    /// ```
    /// let m = fcan_ros2::idl::parse_msg("pkg/msg/M", "float32[] xs\nbuiltin_interfaces/Time t\n").unwrap();
    /// assert_eq!(m.to_msg_text(), "float32[] xs\nbuiltin_interfaces/Time t\n");
    /// ```
    pub fn to_msg_text(&self) -> String {
        let mut s = String::new();
        for f in &self.fields {
            s.push_str(&type_text(&f.base, f.shape));
            s.push(' ');
            s.push_str(&f.name);
            s.push('\n');
        }
        s
    }
}

/// A service type: `pkg/srv/Name` with its request and response messages
/// (`pkg/srv/Name_Request`, `pkg/srv/Name_Response`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Service {
    /// `pkg/srv/Name`.
    pub name: String,
    /// The request message.
    pub request: Message,
    /// The response message.
    pub response: Message,
}

impl Service {
    /// The service as `.srv` text: request, `---`, response.
    pub fn to_srv_text(&self) -> String {
        format!(
            "{}---\n{}",
            self.request.to_msg_text(),
            self.response.to_msg_text()
        )
    }
}

/// A full interface name split: `std_msgs/msg/Bool` → (`std_msgs`, `msg`, `Bool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeName<'a> {
    /// The package.
    pub package: &'a str,
    /// `msg` or `srv`.
    pub kind: &'a str,
    /// The type's own name.
    pub name: &'a str,
}

impl<'a> TypeName<'a> {
    /// Splits and checks a full name the way ROS spells it: a package name
    /// (`[a-z][a-z0-9_]*`, no `__`, no trailing `_`), `msg` or `srv`, and a type name
    /// (`[A-Z][A-Za-z0-9]*`; `_Request`/`_Response` are the services' halves, named
    /// by this crate, never by a schema).
    ///
    /// ```
    /// use fcan_ros2::idl::TypeName;
    /// let t = TypeName::parse("std_srvs/srv/SetBool").unwrap();
    /// assert_eq!((t.package, t.kind, t.name), ("std_srvs", "srv", "SetBool"));
    /// assert!(TypeName::parse("std_msgs/Bool").is_err());
    /// assert!(TypeName::parse("Std/msg/Bool").is_err());
    /// ```
    pub fn parse(full: &'a str) -> Result<TypeName<'a>, IdlError> {
        let bad = |why: &str| IdlError(format!("`{full}` is not a ROS 2 type name: {why}"));
        let mut parts = full.split('/');
        let (Some(package), Some(kind), Some(name), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected `package/msg/Type` or `package/srv/Type`"));
        };
        if !is_package_name(package) {
            return Err(bad(
                "the package must be lower case letters, digits and single underscores",
            ));
        }
        if kind != "msg" && kind != "srv" {
            return Err(bad("the middle part must be `msg` or `srv`"));
        }
        if !is_type_name(name) {
            return Err(bad(
                "the type must start with an upper case letter and hold only letters and digits",
            ));
        }
        Ok(TypeName {
            package,
            kind,
            name,
        })
    }
}

/// Whether `s` is a valid ROS package name (`[a-z][a-z0-9_]*`, no `__`, no trailing `_`).
pub fn is_package_name(s: &str) -> bool {
    is_snake(s)
}

/// Whether `s` is a valid ROS field name (the same rule as a package name).
pub fn is_field_name(s: &str) -> bool {
    is_snake(s)
}

fn is_snake(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
        && !s.ends_with('_')
}

/// Whether `s` is a valid ROS message or service type name (`[A-Z][A-Za-z0-9]*`).
pub fn is_type_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A definition that cannot be read. Names the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdlError(pub String);

impl fmt::Display for IdlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IdlError {}

fn type_text(base: &BaseType, shape: Shape) -> String {
    let mut s = match base {
        BaseType::Primitive(p) => p.msg_name().to_string(),
        BaseType::BoundedString(n) => format!("string<={n}"),
        BaseType::Nested(full) => match TypeName::parse(full) {
            Ok(t) => format!("{}/{}", t.package, t.name),
            Err(_) => full.clone(),
        },
    };
    match shape {
        Shape::Single => {}
        Shape::Array(n) => s.push_str(&format!("[{n}]")),
        Shape::Sequence => s.push_str("[]"),
        Shape::BoundedSequence(n) => s.push_str(&format!("[<={n}]")),
    }
    s
}

/// Reads a `.msg` definition of the message `full_name` (`pkg/msg/Name`). A nested
/// type written without a package (`Vector3`) is in the message's own package;
/// `Header` alone is `std_msgs/msg/Header`, as in ROS.
///
/// ```
/// let m = fcan_ros2::idl::parse_msg("geometry_msgs/msg/Twist", "Vector3 linear\nVector3 angular\n").unwrap();
/// assert_eq!(m.fields[0].base, fcan_ros2::idl::BaseType::Nested("geometry_msgs/msg/Vector3".into()));
/// ```
pub fn parse_msg(full_name: &str, text: &str) -> Result<Message, IdlError> {
    let package = TypeName::parse(full_name).map(|t| t.package).or_else(|_| {
        // A service's halves (`pkg/srv/Name_Request`) carry an underscore.
        full_name
            .split('/')
            .next()
            .filter(|p| is_package_name(p))
            .ok_or_else(|| IdlError(format!("`{full_name}` is not a ROS 2 type name")))
    })?;
    let mut fields: Vec<RosField> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |why: String| IdlError(format!("{full_name} line {}: {why}", n + 1));
        let mut words = line.split_whitespace();
        let (Some(ty), Some(rest)) = (words.next(), words.next()) else {
            return Err(at(format!("expected `type name`, found `{line}`")));
        };
        // `TYPE NAME=value` is a constant; `TYPE NAME value` a field with a default.
        // (The type itself may hold `<=`, a bound.)
        if line[ty.len()..].contains('=') {
            continue;
        }
        let name = rest;
        if !is_field_name(name) {
            return Err(at(format!("`{name}` is not a valid field name")));
        }
        if fields.iter().any(|f| f.name == name) {
            return Err(at(format!("field `{name}` declared twice")));
        }
        let (base_text, shape) = split_shape(ty).map_err(at)?;
        let base = parse_base(package, base_text).map_err(at)?;
        fields.push(RosField {
            name: name.to_string(),
            base,
            shape,
        });
    }
    Ok(Message {
        name: full_name.to_string(),
        fields,
    })
}

/// Reads a `.srv` definition of the service `full_name` (`pkg/srv/Name`): the request,
/// a `---` line, the response.
///
/// ```
/// let s = fcan_ros2::idl::parse_srv("std_srvs/srv/SetBool", "bool data\n---\nbool success\nstring message\n").unwrap();
/// assert_eq!(s.request.name, "std_srvs/srv/SetBool_Request");
/// assert_eq!(s.response.fields.len(), 2);
/// ```
pub fn parse_srv(full_name: &str, text: &str) -> Result<Service, IdlError> {
    let t = TypeName::parse(full_name)?;
    if t.kind != "srv" {
        return Err(IdlError(format!("`{full_name}` is not a service type")));
    }
    // A leading newline lets a definition with an empty request (`---` on the first
    // line) split like any other.
    let text = format!("\n{text}");
    let mut halves = text.splitn(2, "\n---");
    let request = halves.next().unwrap_or("");
    let response = halves.next().ok_or_else(|| {
        IdlError(format!(
            "{full_name}: no `---` line between request and response"
        ))
    })?;
    let response = response.split_once('\n').map_or("", |(_, r)| r);
    Ok(Service {
        name: full_name.to_string(),
        request: parse_msg(&format!("{full_name}_Request"), request)?,
        response: parse_msg(&format!("{full_name}_Response"), response)?,
    })
}

fn split_shape(ty: &str) -> Result<(&str, Shape), String> {
    let Some(open) = ty.find('[') else {
        return Ok((ty, Shape::Single));
    };
    let base = &ty[..open];
    let inner = ty[open + 1..]
        .strip_suffix(']')
        .ok_or_else(|| format!("`{ty}`: unclosed `[`"))?;
    let number = |s: &str| {
        s.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{ty}`: `{s}` is not a positive size"))
    };
    let shape = if inner.is_empty() {
        Shape::Sequence
    } else if let Some(bound) = inner.strip_prefix("<=") {
        Shape::BoundedSequence(number(bound)?)
    } else {
        Shape::Array(number(inner)?)
    };
    Ok((base, shape))
}

fn parse_base(package: &str, s: &str) -> Result<BaseType, String> {
    if let Some(p) = Primitive::parse(s) {
        return Ok(BaseType::Primitive(p));
    }
    if let Some(bound) = s.strip_prefix("string<=") {
        return bound
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(BaseType::BoundedString)
            .ok_or_else(|| format!("`{s}`: bad string bound"));
    }
    if s.starts_with("wstring") || s == "wchar" {
        return Err(format!("`{s}` is not supported"));
    }
    let (pkg, name) = match s.split_once('/') {
        Some((pkg, name)) => (pkg, name),
        None if s == "Header" => ("std_msgs", "Header"),
        None => (package, s),
    };
    if !is_package_name(pkg) || !is_type_name(name) {
        return Err(format!("`{s}` is neither a primitive nor a message type"));
    }
    Ok(BaseType::Nested(format!("{pkg}/msg/{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_defaults_and_comments_are_dropped() {
        let m = parse_msg(
            "p/msg/M",
            "# a comment\nuint8 A=1\nuint8 B = 2\nint32 x 5 # default\nstring<=8 s\nfloat64[<=3] v\n",
        )
        .unwrap();
        let names: Vec<_> = m.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["x", "s", "v"]);
        assert_eq!(m.fields[1].base, BaseType::BoundedString(8));
        assert_eq!(m.fields[2].shape, Shape::BoundedSequence(3));
    }

    #[test]
    fn bad_lines_are_refused_with_their_line() {
        for (text, needle) in [
            ("float32\n", "line 1"),
            ("int32 x\nint32 x\n", "twice"),
            ("int32 Bad\n", "field name"),
            ("float32[0] x\n", "positive"),
            ("wstring w\n", "not supported"),
            ("float32[ x\n", "unclosed"),
        ] {
            let e = parse_msg("p/msg/M", text).unwrap_err().0;
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        assert!(parse_srv("p/srv/S", "bool a\n").is_err());
    }

    #[test]
    fn text_round_trips() {
        let text =
            "bool a\nstring<=4 b\nint8[3] c\nuint64[] d\nfloat32[<=2] e\nstd_msgs/Header h\n";
        let m = parse_msg("p/msg/M", text).unwrap();
        assert_eq!(m.to_msg_text(), text);
        assert_eq!(parse_msg("p/msg/M", &m.to_msg_text()).unwrap(), m);
    }
}

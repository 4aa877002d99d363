//! A small YAML document tree that remembers where every node starts.
//!
//! Built from `saphyr-parser` events. Schemas need positions on every key so that each
//! error can say `file:line:col`; serde-based YAML crates drop them.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A 1-based line and column in a source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column (characters), from 1.
    pub col: u32,
}

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos {
            line: span.start.line() as u32,
            col: span.start.col() as u32 + 1,
        }
    }
}

/// One node of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// What it is.
    pub kind: Kind,
}

/// The kinds of YAML nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A scalar, with whether it was written plain (unquoted): only plain scalars are
    /// numbers, booleans or null.
    Scalar {
        /// The text.
        value: String,
        /// Unquoted.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order (duplicate keys kept; the converter reports them).
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar text, if this is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// Whether this is YAML null (`~`, `null`, or nothing at all).
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { value, plain: true }
            if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// A short description of the node's kind, for messages.
    pub fn describe(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar { .. } if self.is_null() => "nothing (null)",
            Kind::Scalar { plain: false, .. } => "a quoted string",
            Kind::Scalar { value, .. } if value.parse::<f64>().is_ok() => "a number",
            Kind::Scalar { .. } => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }
}

/// A YAML syntax error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub message: String,
}

enum Open {
    Seq(Pos, usize, Vec<Node>),
    Map(Pos, usize, Vec<(Node, Node)>, Option<Node>),
}

/// Parses one YAML document. An empty file (or only comments) gives `None`.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: Vec<Option<Node>> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    while let Some(ev) = parser.next_event() {
        let (event, span) = ev.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line() as u32,
                col: e.marker().col() as u32 + 1,
            },
            message: format!("YAML syntax: {}", e.info()),
        })?;
        let pos = Pos::of(&span);
        let done: Option<(Node, usize)> = match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => None,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a schema file holds one YAML document; split the others into their own files".into(),
                    });
                }
                None
            }
            Event::Alias(id) => {
                let node = anchors.get(id).cloned().flatten().ok_or(SyntaxError {
                    pos,
                    message: "YAML alias refers to an anchor that is not complete yet".into(),
                })?;
                Some((Node { pos, ..node }, 0))
            }
            Event::Scalar(value, style, anchor, _tag) => Some((
                Node {
                    pos,
                    kind: Kind::Scalar {
                        value: value.into_owned(),
                        plain: style == ScalarStyle::Plain,
                    },
                },
                anchor,
            )),
            Event::SequenceStart(anchor, _) => {
                stack.push(Open::Seq(pos, anchor, Vec::new()));
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Open::Map(pos, anchor, Vec::new(), None));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(p, anchor, items)) => Some((
                    Node {
                        pos: p,
                        kind: Kind::Seq(items),
                    },
                    anchor,
                )),
                _ => unreachable_event(pos)?,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(p, anchor, items, _)) => Some((
                    Node {
                        pos: p,
                        kind: Kind::Map(items),
                    },
                    anchor,
                )),
                _ => unreachable_event(pos)?,
            },
        };
        if let Some((node, anchor)) = done {
            if anchor > 0 {
                if anchors.len() <= anchor {
                    anchors.resize(anchor + 1, None);
                }
                anchors[anchor] = Some(node.clone());
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Open::Seq(_, _, items)) => items.push(node),
                Some(Open::Map(_, _, items, key)) => match key.take() {
                    None => *key = Some(node),
                    Some(k) => items.push((k, node)),
                },
            }
        }
    }
    Ok(root)
}

fn unreachable_event(pos: Pos) -> Result<Option<(Node, usize)>, SyntaxError> {
    Err(SyntaxError {
        pos,
        message: "YAML syntax: unbalanced collection".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_keys() {
        let doc = parse("a: 1\nb:\n  c: { d: x }\n").unwrap().unwrap();
        let Kind::Map(items) = &doc.kind else {
            panic!()
        };
        assert_eq!(items[0].0.pos, Pos { line: 1, col: 1 });
        assert_eq!(items[1].0.pos, Pos { line: 2, col: 1 });
        let Kind::Map(inner) = &items[1].1.kind else {
            panic!()
        };
        assert_eq!(inner[0].0.pos, Pos { line: 3, col: 3 });
        let Kind::Map(flow) = &inner[0].1.kind else {
            panic!()
        };
        assert_eq!(flow[0].0.pos, Pos { line: 3, col: 8 });
        assert_eq!(flow[0].1.as_scalar(), Some("x"));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
        assert!(e.message.starts_with("YAML syntax"));
    }

    #[test]
    fn empty_and_quoted() {
        assert_eq!(parse("# nothing\n").unwrap(), None);
        let doc = parse("a: '1'\nb: 1\nc:\n").unwrap().unwrap();
        let Kind::Map(items) = &doc.kind else {
            panic!()
        };
        assert!(matches!(
            &items[0].1.kind,
            Kind::Scalar { plain: false, .. }
        ));
        assert!(matches!(&items[1].1.kind, Kind::Scalar { plain: true, .. }));
        assert!(items[2].1.is_null());
    }

    #[test]
    fn aliases_resolve() {
        let doc = parse("a: &x { k: 1 }\nb: *x\n").unwrap().unwrap();
        let Kind::Map(items) = &doc.kind else {
            panic!()
        };
        assert!(matches!(&items[1].1.kind, Kind::Map(m) if m.len() == 1));
    }
}

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

/// The kinds of YAML nodes. Deliberately exhaustive: YAML has scalars, sequences and
/// mappings, nothing else.
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

impl std::fmt::Display for SyntaxError {
    /// `LINE:COL: MESSAGE` (the loader prefixes the file).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: YAML syntax error: {}",
            self.pos.line, self.pos.col, self.message
        )
    }
}

impl std::error::Error for SyntaxError {}

/// The most nodes a document may produce, counting every node an alias repeats: far
/// above any real schema (a node with 255 blocks of a large type is a few thousand),
/// far below what a "billion laughs" file (aliases of aliases, each doubling the tree)
/// would take in memory and time.
pub const MAX_NODES: usize = 200_000;

/// The deepest nesting of collections a document may have. Schemas nest about six
/// levels; the cap keeps the recursive conversion and drop of the tree off the edge of
/// the stack.
pub const MAX_DEPTH: usize = 64;

/// An open collection: where it starts, its anchor, its items so far, and the node count
/// when it opened (its own size is the count at its end minus this).
enum Open {
    Seq(Pos, usize, usize, Vec<Node>),
    Map(Pos, usize, usize, Vec<(Node, Node)>, Option<Node>),
}

/// A flow mapping's syntax error on a line with an unquoted `{i}` (`{ns: grip{i}}`):
/// the `{` opened a mapping. Says to quote the name; empty otherwise.
fn placeholder_hint(text: &str, line: usize, info: &str) -> &'static str {
    let Some(l) = line.checked_sub(1).and_then(|n| text.lines().nth(n)) else {
        return "";
    };
    // The line without its quoted parts.
    let mut quote = None;
    let bare: String = l
        .chars()
        .filter(|&c| {
            match quote {
                Some(q) if c == q => quote = None,
                None if c == '"' || c == '\'' => quote = Some(c),
                _ => {}
            }
            quote.is_none() && c != '"' && c != '\''
        })
        .collect();
    let unquoted = bare.contains("{i}");
    if info.contains("flow mapping") && unquoted {
        "; a name with `{i}` inside `{ … }` must be quoted (`ns: \"grip{i}\"`): \
         unquoted, its `{` starts a flow mapping"
    } else {
        ""
    }
}

/// Parses one YAML document. An empty file (or only comments) gives `None`.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    // Each anchored node with its size in nodes (what one alias of it adds).
    let mut anchors: Vec<Option<(Node, usize)>> = Vec::new();
    // Nodes produced so far, aliases' repeats included.
    let mut produced = 0usize;
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    while let Some(ev) = parser.next_event() {
        let (event, span) = ev.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line() as u32,
                col: e.marker().col() as u32 + 1,
            },
            message: format!(
                "YAML syntax: {}{}",
                e.info(),
                placeholder_hint(text, e.marker().line(), e.info())
            ),
        })?;
        let pos = Pos::of(&span);
        let done: Option<(Node, usize, usize)> = match event {
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
                let (node, size) = anchors
                    .get(id)
                    .and_then(Option::as_ref)
                    .ok_or(SyntaxError {
                        pos,
                        message: "YAML alias refers to an anchor that is not complete yet".into(),
                    })?;
                // Counted before the copy is made: the copy is what costs.
                let start = count(&mut produced, *size, pos)?;
                Some((
                    Node {
                        pos,
                        ..node.clone()
                    },
                    0,
                    start,
                ))
            }
            Event::Scalar(value, style, anchor, _tag) => {
                let start = count(&mut produced, 1, pos)?;
                Some((
                    Node {
                        pos,
                        kind: Kind::Scalar {
                            value: value.into_owned(),
                            plain: style == ScalarStyle::Plain,
                        },
                    },
                    anchor,
                    start,
                ))
            }
            Event::SequenceStart(anchor, _) => {
                let start = open(stack.len(), &mut produced, pos)?;
                stack.push(Open::Seq(pos, anchor, start, Vec::new()));
                None
            }
            Event::MappingStart(anchor, _) => {
                let start = open(stack.len(), &mut produced, pos)?;
                stack.push(Open::Map(pos, anchor, start, Vec::new(), None));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(p, anchor, start, items)) => Some((
                    Node {
                        pos: p,
                        kind: Kind::Seq(items),
                    },
                    anchor,
                    start,
                )),
                _ => unreachable_event(pos)?,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(p, anchor, start, items, _)) => Some((
                    Node {
                        pos: p,
                        kind: Kind::Map(items),
                    },
                    anchor,
                    start,
                )),
                _ => unreachable_event(pos)?,
            },
        };
        if let Some((node, anchor, start)) = done {
            if anchor > 0 {
                if anchors.len() <= anchor {
                    anchors.resize(anchor + 1, None);
                }
                // Itself and everything inside it, repeats by aliases included.
                let size = produced.saturating_sub(start).max(1);
                anchors[anchor] = Some((node.clone(), size));
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Open::Seq(_, _, _, items)) => items.push(node),
                Some(Open::Map(_, _, _, items, key)) => match key.take() {
                    None => *key = Some(node),
                    Some(k) => items.push((k, node)),
                },
            }
        }
    }
    Ok(root)
}

/// Counts `n` more nodes; returns the count before them. Refuses to pass [`MAX_NODES`].
fn count(produced: &mut usize, n: usize, pos: Pos) -> Result<usize, SyntaxError> {
    let start = *produced;
    *produced = start.saturating_add(n);
    if *produced > MAX_NODES {
        return Err(SyntaxError {
            pos,
            message: format!(
                "YAML aliases expand this document past {MAX_NODES} nodes; write the repeated parts out, or repeat less"
            ),
        });
    }
    Ok(start)
}

/// A collection opens at nesting `depth`: counted, and refused past [`MAX_DEPTH`].
fn open(depth: usize, produced: &mut usize, pos: Pos) -> Result<usize, SyntaxError> {
    if depth >= MAX_DEPTH {
        return Err(SyntaxError {
            pos,
            message: format!("YAML nesting deeper than {MAX_DEPTH} levels"),
        });
    }
    count(produced, 1, pos)
}

fn unreachable_event(pos: Pos) -> Result<Option<(Node, usize, usize)>, SyntaxError> {
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

    /// Issue 38 item 13: `{ns: grip{i}}` — the docs warn, the error says it too; a
    /// quoted `{i}` on a line with another error gets no such hint.
    #[test]
    fn an_unquoted_placeholder_in_a_flow_mapping_is_named() {
        let e = parse("instances:\n  - {type: A, max_count: 2, ns: grip{i}}\n").unwrap_err();
        assert_eq!(e.pos.line, 2, "{e:?}");
        assert!(e.message.starts_with("YAML syntax"), "{e:?}");
        assert!(
            e.message.contains("must be quoted (`ns: \"grip{i}\"`)"),
            "{e:?}"
        );
        let e = parse("instances:\n  - {type: A, ns: \"grip{i}\" max_count: 2}\n").unwrap_err();
        assert!(!e.message.contains("must be quoted"), "{e:?}");
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

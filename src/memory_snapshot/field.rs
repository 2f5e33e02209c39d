//! Reading one field of a snapshot's values: an integer, a string, the items of a list or
//! a dict, or the one line that says where a value of the wrong type is.

use super::value::{Node, Tree, Val};

/// What is wrong, from where it is (`segments[0].size is a string, not an integer`).
pub(super) type Failed = String;

/// What a value is once a node that was read is looked through.
pub(super) fn resolve(tree: &Tree<'_>, v: Val) -> Val {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::Read(read)) => *read,
            _ => v,
        },
        _ => v,
    }
}

pub(super) fn want(tree: &Tree<'_>, what: &str, v: Val, at: &dyn Fn() -> String) -> Failed {
    format!("{} is {}, not {what}", at(), tree.kind(v))
}

/// An integer or None; a bool counts as 0 or 1.
pub(super) fn int(tree: &Tree<'_>, v: Val, at: &dyn Fn() -> String) -> Result<Option<i64>, Failed> {
    match v {
        Val::Int(i) => Ok(Some(i)),
        Val::Bool(b) => Ok(Some(i64::from(b))),
        Val::None => Ok(None),
        Val::BigInt { .. } => Err(format!("{} is too large", at())),
        other => Err(want(tree, "an integer", other, at)),
    }
}

pub(super) fn uint(
    tree: &Tree<'_>,
    v: Val,
    at: &dyn Fn() -> String,
) -> Result<Option<u64>, Failed> {
    match int(tree, v, at)? {
        None => Ok(None),
        Some(i) => u64::try_from(i)
            .map(Some)
            .map_err(|_| format!("{} is negative ({i})", at())),
    }
}

/// A string (cleaned) or None.
pub(super) fn text(
    tree: &Tree<'_>,
    v: Val,
    at: &dyn Fn() -> String,
) -> Result<Option<String>, Failed> {
    match v {
        Val::Str { .. } => Ok(tree.str(v).map(|s| crate::text::clean(s).into_owned())),
        Val::Bytes { at: start, len } => Ok(Some(crate::text::clean_bytes(tree.range(start, len)))),
        Val::OldText => Err(format!(
            "{} is a protocol 0 string, which no snapshot holds",
            at()
        )),
        Val::None => Ok(None),
        other => Err(want(tree, "a string", other, at)),
    }
}

/// The items of a list or tuple (a copy of the small values: the caller reads the tree
/// while it goes through them).
pub(super) fn items(
    tree: &Tree<'_>,
    v: Val,
    at: &dyn Fn() -> String,
    what: &str,
) -> Result<Vec<Val>, Failed> {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::List(l) | Node::DeviceTraces(l) | Node::Tuple(l)) => Ok(l.clone()),
            Some(Node::Trace(_)) => Err(format!(
                "{} is a list laid out as a device's history, not {what}",
                at()
            )),
            _ => Err(want(tree, what, v, at)),
        },
        _ => Err(want(tree, what, v, at)),
    }
}

pub(super) fn dict(
    tree: &Tree<'_>,
    v: Val,
    at: &dyn Fn() -> String,
    what: &str,
) -> Result<Vec<(Val, Val)>, Failed> {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::Dict(d)) => Ok(d.clone()),
            _ => Err(want(tree, what, v, at)),
        },
        _ => Err(want(tree, what, v, at)),
    }
}

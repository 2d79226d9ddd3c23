//! Comparisons of a field with a string, found in the program before it runs, so that a read
//! of a field whose tool declares its values (`Shape::Choice`) can refuse a program that
//! compares it with a value it never has: `entry.kind === "directory"` where `fs.list` gives
//! `"file"` or `"dir"`. JavaScript answers such a comparison with `false` without a word, the
//! filter keeps nothing, and the answer is built from a search's start values (" has the most
//! files with 0"). The read throws instead, naming the values there are (`typed.rs`).

use std::ops::ControlFlow;

use boa_engine::ast::Spanned;
use boa_engine::ast::expression::Expression;
use boa_engine::ast::expression::access::{PropertyAccess, PropertyAccessField};
use boa_engine::ast::expression::literal::LiteralKind;
use boa_engine::ast::expression::operator::Binary;
use boa_engine::ast::expression::operator::binary::{BinaryOp, RelationalOp};
use boa_engine::ast::statement::Switch;
use boa_engine::ast::visitor::{VisitWith, Visitor};
use boa_engine::interner::Interner;

use super::source::SyntaxTree;

/// `something.field` compared with a string: by `==`, `===`, `!=` or `!==`, or as a `case` of a
/// `switch` on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Comparison {
    pub(super) field: String,
    pub(super) value: String,
    pub(super) line: u32,
}

/// Every comparison of a named field with a string literal in `tree`.
pub(super) fn comparisons(tree: &SyntaxTree) -> Vec<Comparison> {
    let mut finder = Finder {
        interner: &tree.interner,
        line_offset: tree.line_offset,
        found: Vec::new(),
    };
    let _ = tree.script.visit_with(&mut finder);
    finder.found
}

struct Finder<'i> {
    interner: &'i Interner,
    line_offset: u32,
    found: Vec<Comparison>,
}

impl Finder<'_> {
    fn field(&self, expression: &Expression) -> Option<String> {
        let Expression::PropertyAccess(PropertyAccess::Simple(access)) = expression else {
            return None;
        };
        let PropertyAccessField::Const(name) = access.field() else {
            return None;
        };
        Some(self.interner.resolve_expect(name.sym()).to_string())
    }

    fn text(&self, expression: &Expression) -> Option<String> {
        let Expression::Literal(literal) = expression else {
            return None;
        };
        let LiteralKind::String(text) = literal.kind() else {
            return None;
        };
        Some(self.interner.resolve_expect(*text).to_string())
    }

    fn note(&mut self, field: String, value: String, line: u32) {
        let line = line.saturating_sub(self.line_offset).max(1);
        self.found.push(Comparison { field, value, line });
    }
}

impl<'ast> Visitor<'ast> for Finder<'_> {
    type BreakTy = ();

    fn visit_binary(&mut self, node: &'ast Binary) -> ControlFlow<()> {
        if let BinaryOp::Relational(
            RelationalOp::Equal
            | RelationalOp::NotEqual
            | RelationalOp::StrictEqual
            | RelationalOp::StrictNotEqual,
        ) = node.op()
        {
            let pair = match (self.field(node.lhs()), self.text(node.rhs())) {
                (Some(field), Some(value)) => Some((field, value)),
                _ => self.field(node.rhs()).zip(self.text(node.lhs())),
            };
            if let Some((field, value)) = pair {
                self.note(field, value, node.span().start().line_number());
            }
        }
        node.visit_with(self)
    }

    fn visit_switch(&mut self, node: &'ast Switch) -> ControlFlow<()> {
        if let Some(field) = self.field(node.val()) {
            for case in node.cases() {
                if let Some(condition) = case.condition()
                    && let Some(value) = self.text(condition)
                {
                    let line = condition.span().start().line_number();
                    self.note(field.clone(), value, line);
                }
            }
        }
        node.visit_with(self)
    }
}

/// The error of reading `field` (at `place` in `tool`'s result, one of `values`) in a program
/// that compares it with a value no tool gives it (`given`: every value the tools declare for a
/// field of that name); `None` when every comparison is with a value there may be.
pub(super) fn never(
    comparisons: &[Comparison],
    tool: &str,
    place: &str,
    field: &str,
    values: &[String],
    given: &[String],
) -> Option<String> {
    let wrong = comparisons
        .iter()
        .find(|compared| compared.field == field && !given.contains(&compared.value))?;
    let at = if place.is_empty() {
        format!("`{field}` in the result of {tool}")
    } else {
        format!("`{place}.{field}` in the result of {tool}")
    };
    let listed = match values {
        [one] => format!("always \"{one}\""),
        [first, second] => format!("\"{first}\" or \"{second}\""),
        _ => format!(
            "one of {}",
            values
                .iter()
                .map(|value| format!("\"{value}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(format!(
        "{at} is {listed}; line {} compares it with \"{}\", a value it never has, so the \
         comparison would come out the same for every result",
        wrong.line, wrong.value
    ))
}

use super::{Undeclared, undeclared_call};

const KNOWN: &[&str] = &[
    "parseInt",
    "parseFloat",
    "Number",
    "String",
    "Date",
    "Map",
    "Set",
    "Error",
    "done",
    "log",
    "output",
    "fsRead",
    "JSON",
    "Promise",
];

fn known(name: &str) -> bool {
    KNOWN.contains(&name)
}

fn first(source: &str) -> Option<(String, usize)> {
    undeclared_call(source, 0, &known).map(|Undeclared { name, start }| (name, start))
}

#[track_caller]
fn refused(source: &str, name: &str) {
    let found = first(source);
    let start = found.as_ref().map(|(_, start)| *start);
    assert_eq!(
        found.as_ref().map(|(name, _)| name.as_str()),
        Some(name),
        "{source}"
    );
    let start = start.unwrap();
    assert_eq!(&source[start..start + name.len()], name, "{source}");
}

#[track_caller]
fn passes(source: &str) {
    assert_eq!(first(source), None, "{source}");
}

#[test]
fn a_call_of_a_name_nobody_declared_is_found_where_the_name_starts() {
    refused(
        "const read = requireArtifact('fs').read;",
        "requireArtifact",
    );
    refused("const data = readFileSync(\"a.json\");", "readFileSync");
    refused("const x = 1;\nawait fetchData(x);", "fetchData");
    refused("const rows = [];\nrows.push(makeRow(1));", "makeRow");
    refused("done(`${format(total)}`)", "format");
    refused("const d = new Dayjs();", "Dayjs");
    // Cut short right after the `(`, as a model writes it.
    refused("const fsReadJson = requireArtifact(", "requireArtifact");
    // Declared only after the call (hoisting is not followed).
    refused("main();\nfunction main() { done('x') }", "main");
    // A function of an earlier program is gone.
    refused("const total = sumRows(rows)", "sumRows");
}

#[test]
fn declared_known_member_and_keyword_calls_pass() {
    passes("function total(rows) { return rows.length }\ndone(`${total([])}`)");
    passes("const f = (a, b) => a + b;\ndone(f(1, 2));");
    passes("const g = x => x * 2; log(g(3));");
    passes("async function main() { return 1 }\nmain();");
    passes("const { parse, stringify: show } = JSON;\nparse('1'); show(2);");
    passes("const [first, second] = [parseInt, parseFloat];\nfirst('1'); second('2');");
    passes("let handler;\nhandler = () => 1;\nhandler();");
    passes("try { fsRead({ path: 'a' }) } catch (error) { log(error) }");
    passes("const lines = text.split('\\n').map(line => line.trim());");
    passes("if (x) { log(1) } else if (y) { log(2) }\nfor (const a of b) {}\nwhile (z) {}");
    passes("const r = fsRead({ path: 'a' }).content.replace(/,/g, '');");
    passes("switch (kind) { case 'a': log(1); }\nreturn typeof (x);");
    passes("const x = new Date(); const m = new Map(); throw new Error('no');");
    passes("(function () { log(1) })();\n(async () => { done('a') })();");
    passes("function* gen(n) { yield n }\ngen(1);");
    passes("const api = { get(id) { return id }, async load() {}, set(v) {} };\napi.get(1);");
    passes(
        "class Report { constructor(rows) { this.rows = rows } total() { return 1 } }\nnew Report([]).total();",
    );
    passes("const o = { value: parseInt('1'), nested: { f() {} } };");
    passes("const f = function inner(n) { return n ? inner(n - 1) : 0 };\nf(3);");
}

#[test]
fn strings_templates_comments_and_regexes_hold_no_calls() {
    passes("log('requireArtifact(1)'); log(\"readFile(x)\");");
    passes("// requireArtifact('fs')\n/* readFile(a) */ done('x')");
    passes("const t = `call foo(1) and ${parseInt('2')} then bar(3)`;");
    passes("const re = /foo\\(bar\\)/g; const d = 4 / 2 / (1);");
    passes("const s = 'unterminated foo(");
    // Inside a template's `${…}` a call is code again.
    refused("const t = `a ${helper(1)} b`;", "helper");
    refused("const t = `a ${`inner ${deep(1)}`} b`;", "deep");
    // A division is not a regular expression: `(a) / b(` is a call.
    refused("const r = (a) / scale(2);", "scale");
}

#[test]
fn only_calls_from_the_given_offset_are_reported() {
    let source = "const a = undefinedOne(1);\nconst b = undefinedTwo(2);";
    let second = source.find("undefinedTwo").unwrap();
    assert_eq!(
        undeclared_call(source, second, &known),
        Some(Undeclared {
            name: "undefinedTwo".to_owned(),
            start: second,
        })
    );
    assert_eq!(undeclared_call(source, source.len(), &known), None);
}

#[test]
fn the_readme_example_holds() {
    let known = |name: &str| matches!(name, "parseInt" | "done");
    let found = undeclared_call("const read = requireArtifact(", 0, &known).unwrap();
    assert_eq!((found.name.as_str(), found.start), ("requireArtifact", 13));
    assert!(undeclared_call("function f(x) { return parseInt(x) }\ndone(f(", 0, &known).is_none());
}

mod literals {
    use serde_json::json;

    use crate::{Argument, literal_calls};

    fn arguments(source: &str, callee: &str) -> Vec<Argument> {
        literal_calls(source, callee)
            .into_iter()
            .map(|call| call.argument)
            .collect()
    }

    fn literal(value: serde_json::Value, source: &str) -> Argument {
        Argument::Literal {
            value,
            end: source.rfind(')').unwrap() + 1,
        }
    }

    #[test]
    fn a_literal_argument_is_read_as_json() {
        for (source, value) in [
            (
                r#"fs.list({ path: "timesheet.csv" })"#,
                json!({ "path": "timesheet.csv" }),
            ),
            (
                "fs.list({ 'path': 'a\\'b', recursive: true, depth: -2, size: 1.5, })",
                json!({ "path": "a'b", "recursive": true, "depth": -2, "size": 1.5 }),
            ),
            (
                "fs.list ( {\n  tier: `core`, // the first\n  tags: [1, \"x\", null, { a: [] }] /* done */ } )",
                json!({ "tier": "core", "tags": [1, "x", null, { "a": [] }] }),
            ),
            ("fs.list()", json!({})),
            ("fs.list({ path: undefined })", json!({ "path": null })),
            ("fs.list(\"\\u0041\\n\")", json!("A\n")),
        ] {
            assert_eq!(
                arguments(source, "fs.list"),
                [literal(value, source)],
                "{source}"
            );
        }
    }

    #[test]
    fn anything_but_one_literal_is_other() {
        for source in [
            "fs.list({ path })",
            "fs.list({ path: dir })",
            "fs.list({ path: \"a\" + name })",
            "fs.list({ path: `${dir}/a` })",
            "fs.list({ path: \"a\" }, 2)",
            "fs.list(dir)",
            "fs.list({ [key]: 1 })",
            "fs.list({ f() { return 1 } })",
            "fs.list(NaN)",
        ] {
            assert_eq!(arguments(source, "fs.list"), [Argument::Other], "{source}");
        }
    }

    #[test]
    fn a_call_cut_short_is_unfinished() {
        let whole = "fs.list({ path: \"timesheet.csv\", recursive: true })";
        for end in "fs.list(".len()..whole.len() {
            assert_eq!(
                arguments(&whole[..end], "fs.list"),
                [Argument::Unfinished],
                "{}",
                &whole[..end]
            );
        }
        assert_eq!(
            arguments("fs.list({ n: 12", "fs.list"),
            [Argument::Unfinished]
        );
        assert_eq!(
            arguments("fs.list({ ok: tru", "fs.list"),
            [Argument::Unfinished]
        );
        assert_eq!(
            arguments("fs.list({ // a note", "fs.list"),
            [Argument::Unfinished]
        );
    }

    #[test]
    fn only_calls_of_the_whole_name_count() {
        let source = "myfs.list({}); fs.lister({}); a.fs.list({}); fs.list; x = fs.list ({})";
        let calls = literal_calls(source, "fs.list");
        assert_eq!(calls.len(), 1);
        let start = source.rfind("fs.list").unwrap();
        assert_eq!((calls[0].start, calls[0].method), (start, start + 3));
        assert_eq!(
            calls[0].argument,
            Argument::Literal {
                value: json!({}),
                end: source.len()
            }
        );
        assert_eq!(literal_calls("done(1)", "done")[0].method, 0);
    }
}

mod bound {
    use crate::{BoundRead, bound_reads, undecided_pattern};

    fn reads(source: &str) -> Vec<(String, String, String, bool)> {
        bound_reads(source, &|callee| {
            matches!(callee, "fs.read" | "fsList" | "time.now")
        })
        .into_iter()
        .map(
            |BoundRead {
                 name,
                 callee,
                 field,
                 start,
                 complete,
                 pattern,
             }| {
                assert!(source[start..].starts_with(&field), "{source}");
                assert_eq!(pattern.is_some(), name == field && name != "r", "{source}");
                (name, callee, field, complete)
            },
        )
        .collect()
    }

    fn read(
        name: &str,
        callee: &str,
        field: &str,
        complete: bool,
    ) -> (String, String, String, bool) {
        (
            name.to_owned(),
            callee.to_owned(),
            field.to_owned(),
            complete,
        )
    }

    #[test]
    fn the_readme_example_holds() {
        let source = "const r = fs.read({ path: 'a.csv' });\nconst rows = r.entries";
        let reads = bound_reads(source, &|callee| callee == "fs.read");
        assert_eq!(
            (reads[0].field.as_str(), reads[0].complete),
            ("entries", false)
        );
        assert_eq!(reads[0].start, source.len() - "entries".len());
    }

    #[test]
    fn reads_of_a_const_bound_to_a_call_are_found() {
        let source = "const r = fs.read({ path: 'a.csv' });\nconst rows = r.entries.map(e => e.x);\nlog(`${r?.content}`);\ndone(r.cont";
        assert_eq!(
            reads(source),
            [
                read("r", "fs.read", "entries", true),
                read("r", "fs.read", "content", true),
                read("r", "fs.read", "cont", false),
            ]
        );
        // Ended by a line break, a comma, or a block's end; a bare function name too.
        for source in [
            "const r = fs.read({ path: 'a' }) // the file\nlog(r.x)",
            "const r = fsList({}), n = 1; log(r.x)",
            "if (a) { const r = time.now({}) }\nlog(r.x)",
        ] {
            assert_eq!(reads(source).len(), 1, "{source}");
        }
    }

    #[test]
    fn the_fields_a_pattern_takes_from_a_call_are_found() {
        let source = "let { content, size: n = 0, 'q': z, nested: { deep }, ...rest } = fs.read({});\nconst { iso } = time.now({})\nlog(1)";
        let found = bound_reads(source, &|callee| {
            callee == "fs.read" || callee == "time.now"
        });
        let fields: Vec<(&str, usize)> = found
            .iter()
            .map(|read| (read.field.as_str(), read.pattern.unwrap()))
            .collect();
        let second = source.find("{ iso").unwrap();
        assert_eq!(
            fields,
            [("content", 4), ("size", 4), ("nested", 4), ("iso", second)]
        );
        // Chained, or not yet ended: not bound.
        for source in [
            "const { name } = fs.read({}).entries[0];",
            "const { name } = fs.read({})",
            "const { name } = other;",
        ] {
            assert_eq!(
                bound_reads(source, &|callee| callee == "fs.read"),
                [],
                "{source}"
            );
        }
    }

    #[test]
    fn a_pattern_is_undecided_until_what_it_takes_apart_is_told() {
        let callees = |callee: &str| callee == "fs.read";
        for (source, undecided) in [
            ("const { a", true),
            ("const { a } ", true),
            ("const { a } = fs", true),
            ("const { a } = fs.read({ path: 'x' ", true),
            ("const { a } = fs.read({ path: 'x' })", true),
            ("const { a } = fs.read({ path: 'x' });", false),
            ("const { a } = fs.read({}).b", false),
            ("const { a } = other;", false),
            ("const { a } = web.fetch({});", false),
            ("const { a } = JSON.parse(x", false),
            ("const x = 1;", false),
            ("for (const { a } of list) {", false),
        ] {
            let found = undecided_pattern(source, &callees);
            assert_eq!(found.is_some(), undecided, "{source}");
            if let Some(open) = found {
                assert_eq!(&source[open..open + 1], "{", "{source}");
            }
        }
    }

    #[test]
    fn other_reads_and_other_bindings_are_not() {
        for source in [
            // Something chained on the call, or more after it.
            "const r = fs.read({ path: 'a' }).content;\nlog(r.x)",
            "const r = fs.read({ path: 'a' })\n  .content;\nlog(r.x)",
            "const r = fs.read({ path: 'a' }) || {};\nlog(r.x)",
            // Not yet known whether the call is all.
            "const r = fs.read({ path: 'a' })",
            // Another function, `let`, a property of another object, a read before.
            "const r = web.fetch({});\nlog(r.x)",
            "let r = fs.read({});\nr = {};\nlog(r.x)",
            "log(r.x);\nconst r = fs.read({});",
            "const r = fs.read({});\nlog(o.r.x)",
            // In a string, a comment or a template's text.
            "const r = fs.read({});\nlog('r.x', \"r.y\", `r.z ${1}`) // r.w",
            // The name declared again: a parameter, another declaration, a pattern.
            "const r = fs.read({});\nlist.map(r => r.x)",
            "const r = fs.read({});\nlist.map((a, r) => r.x)",
            "const r = fs.read({});\nfunction f(r) { return r.x }",
            "const r = fs.read({});\nfor (const r of rows) log(r.x)",
            "const r = fs.read({});\nconst { r } = o;\nlog(r.x)",
            "const r = fs.read({});\ntry {} catch (r) { log(r.x) }",
        ] {
            assert_eq!(reads(source), [], "{source}");
        }
    }
}

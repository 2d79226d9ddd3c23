//! The code-mode grammar against programs that must pass and programs that must not, one
//! byte per token (the way a vocabulary can always spell text).

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::ApproximateTokEnv;
use llguidance::{Matcher, ParserFactory};
use serde_json::{Value, json};

use super::program_grammar;
use crate::protocol::ToolBinding;
use crate::shape::Shape;

fn binding(id: &str, function: Option<&str>, result: Value) -> ToolBinding {
    ToolBinding {
        id: id.to_owned(),
        function: function.map(str::to_owned),
        aliases: Vec::new(),
        member: Some(id.to_owned()),
        description: String::new(),
        result: Shape::of_schema(&result),
    }
}

fn inputs(id: &str) -> Option<&'static Value> {
    static LIST: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        json!({ "type": "object", "properties": {
            "path": { "type": "string" }, "recursive": { "type": "boolean" } } })
    });
    static READ: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        json!({ "type": "object", "properties": {
            "path": { "type": "string" }, "encoding": { "$ref": "#/$defs/Encoding" } },
            "$defs": { "Encoding": { "enum": ["utf8", "base64"] } } })
    });
    static NOW: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
        || json!({ "type": "object", "properties": { "timezone": { "type": "string" } } }),
    );
    static SAVE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        json!({ "type": "object", "properties": {
            "label": { "type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$" },
            "text": { "type": "string", "pattern": "\\S" },
            "when": { "type": "string", "pattern": "^(?=2)[0-9-]+$" } } })
    });
    match id {
        "note.save" => Some(&SAVE),
        "fs.list" => Some(&LIST),
        "fs.read" => Some(&READ),
        "time.now" => Some(&NOW),
        _ => None,
    }
}

fn grammar() -> String {
    let entry = json!({ "type": "object", "properties": {
        "name": { "type": "string" }, "path": { "type": "string" },
        "kind": { "type": "string" }, "size": { "type": "integer" } } });
    let bindings = vec![
        binding(
            "fs.list",
            Some("fsList"),
            json!({ "type": "object", "properties": {
                "entries": { "type": "array", "items": entry } } }),
        ),
        binding(
            "fs.read",
            None,
            json!({ "type": "object", "properties": { "content": { "type": "string" } } }),
        ),
        binding(
            "time.now",
            None,
            json!({ "type": "object", "properties": {
                "iso": { "type": "string" }, "weekday": { "type": "string" } } }),
        ),
        binding("web.fetch", None, json!({})),
        binding("calc.area", None, json!({ "type": "string" })),
        binding("note.save", None, json!({})),
    ];
    program_grammar(&bindings, inputs)
}

/// `Ok(())` when the grammar takes `program` whole and lets it end there; else the part it
/// took before it refused (or `…` when all was taken but the program may not end).
fn check(program: &str) -> Result<(), String> {
    check_with(&grammar(), program)
}

fn check_with(grammar: &str, program: &str) -> Result<(), String> {
    let env = ApproximateTokEnv::single_byte_env();
    let mut factory = ParserFactory::new_simple(&env).unwrap();
    factory.quiet();
    let parser = factory.create_parser(TopLevelGrammar::from_lark(grammar.to_owned()));
    let mut matcher = Matcher::new(parser);
    if let Some(error) = matcher.get_error() {
        panic!("the grammar does not compile: {error}");
    }
    for (at, byte) in program.bytes().enumerate() {
        let token = byte as u32;
        if matcher.validate_tokens(&[token]).unwrap() != 1 {
            return Err(program[..at].to_owned());
        }
        matcher.consume_token(token).unwrap();
    }
    if matcher.is_accepting().unwrap() {
        Ok(())
    } else {
        Err(format!("{program}…"))
    }
}

#[test]
fn programs_models_write_are_accepted() {
    for program in [
        "done(1)",
        "Object.keys(fs.list({}).entries[0]).length",
        "JSON.stringify(time.now({}));",
        "Math.max(1, 2)",
        "const now = time.now({ timezone: \"Asia/Tokyo\" });\ndone(now.weekday);",
        "```javascript\nconst files = fs.list({ path: \"logs\" }).entries;\nlet total = 0;\nfor (const file of files) {\n  if (file.kind === 'file') total += file.size;\n}\noutput(`total: ${total} bytes`);\n```",
        "```js\nconst text = fs.read({ path: 'a.txt', encoding: 'utf8' }).content;\nconst lines = text.split(/\\r?\\n/).filter((line) => line.trim() !== '');\nconsole.log(lines.length);\ndone({ response: `${lines.length} lines` })\n```",
        "// the biggest file\nconst { entries } = fs.list({ path: '.', recursive: false });\nconst biggest = entries.reduce((a, b) => (b.size > a.size ? b : a));\ndone(biggest.name + ': ' + biggest.size);",
        "const names = fs.list({ path: 'logs' }).entries.map(e => e.name).sort();\nfor (let i = 0; i < names.length; i++) { log(i, names[i]); }",
        "const args = { path: 'x' };\nconst r = fsList(args);\nconst page = web.fetch({ url: 'https://example.com' }).body.slice(0, 10);",
        "const [a, b] = parallel([{ tool: \"fs.read\", input: { path: 'a' } }, { input: {}, 'tool': 'time.now' }]);\ntry { JSON.parse(a.content) } catch (e) { done(String(e)) }",
        "function main() {\n  const r = time.now({});\n  return r.iso;\n}\ndone(main());",
        "const first = fs.list({ path }).entries[0].name;\nconst x = tools[\"fs.read\"]({ path: first });\nlet n = 0x1F + 1.5e3 - .5; n **= 2; n ??= 1;\nswitch (n) { case 1: break; default: n = -n }\nwhile (n > 0) n--;",
        "const a = 1;\nconst b = a + 2;\nlog(b);\nlet c = [a, b];\nc = c.map(x => x * 2);\nif (b > 2) done(b)",
        "(() => {\n  const r = time.now({ timezone: 'UTC' });\n  done(r.iso)\n})();",
        "const x = 1;\n[1, 2].forEach(n => log(n));\n`${x}`;\n-x",
        "'use strict';\nconst x = fs.list({}).entries\n  .filter(e => e.kind == 'dir')\n  .length;\nx",
        "Here is the program:\n```typescript\nconst t = time.now({});\ndone(t.weekday);\n```\nIt reads the time.",
        "const reads = parallel(names.map(n => ({ tool: 'fs.read', input: { path: n } })));\nconst more = parallel([...extra, { tool: \"web.fetch\", input: { url: 'u' } }]);",
        // A field with a `pattern` takes a literal that matches it, or any name or template;
        // one the grammar cannot hold (look-ahead) takes anything.
        "const label = 'x';\nnote.save({ label: \"lena-birthday\", text: ' a ' });\nnote.save({ label });\nnote.save({ label: `n-${label}`, when: '(?=' });\nnote.save({ label: names[0].trim() })",
        // A tool's input fields in any order, each once, a trailing comma or none.
        "fs.list({ recursive: false, path: 'a', });\nfs.list({ path: 'a', recursive: true });\nfs.read({ encoding: 'utf8', 'path': 'b' });\nfs.list({});\ntime.now({ timezone: 'UTC', })",
        "const obj = { 'a-b': 1, default: 2, [`k${1}`]: 3, f() { return 1 }, ...{ c: 4 } };\nobj?.a?.[0]?.(1);\nconst t = typeof obj === 'object' && !(obj instanceof Array);",
        // A result taken apart (the embedded model's provider checks the fields beside the
        // grammar).
        "const { entries } = fs.list({ path: '.' });\nconst { content: text = '', ...rest } = fs.read({ path: 'a' });\nconst { \"iso\": iso } = time.now({});",
        "const { a, b } = JSON.parse(fs.read({ path: 'x' }).content);\nconst { c } = other;\nconst { d } = (fs.list({}));\nconst {} = time.now({});\nconst { e = 1 } = !x ? y : z",
        "const { length } = calc.area({});\nconst { e } = web.fetch({});\nconst [first] = fs.list({}).entries;\nconst { f } = parallel([]) || {}",
        // A string result: its length and its methods.
        "const n = calc.area({}).length;\nconst parts = calc.area({}).split(',').map(Number);\nconst t = fs.read({ path: 'a' }).content.trim().toUpperCase();\nconst c = calc.area({})[0];\nconst s = `${calc.area({})}`;\nconst v = Number(calc.area({}))",
    ] {
        if let Err(taken) = check(program) {
            panic!("refused after {taken:?}\nin {program}");
        }
    }
}

#[test]
fn wrong_calls_fields_and_node_habits_are_refused_where_they_start() {
    for (program, taken) in [
        // A tool that is not declared, on a namespace that is.
        ("fs.readFileSync('a')", "fs."),
        ("fs.mkdir({ dir_name: 'x' })", "fs."),
        // Node's modules and globals are no names here.
        ("const fs = require('fs')", "const "),
        ("const x = require('fs')", "const x = "),
        ("process.exit(1)", ""),
        // A namespace is no value of its own.
        ("const f = fs;", "const f = fs"),
        // An input field the tool does not take; an enum value it does not list.
        ("fs.list({ path: 'a', depth: 2 })", "fs.list({ path: 'a', "),
        (
            "fs.read({ path: 'a', encoding: 'latin1' })",
            "fs.read({ path: 'a', encoding: ",
        ),
        ("time.now({ tz: 'UTC' })", "time.now({ "),
        // A field given twice (JavaScript keeps the last value only), however it is quoted.
        (
            "fs.list({ path: 'a', recursive: true, path: 'b' })",
            "fs.list({ path: 'a', recursive: true, ",
        ),
        (
            "fs.read({ path: 'a', \"path\": 'b' })",
            "fs.read({ path: 'a', ",
        ),
        (
            "time.now({ timezone: 'UTC', timezone: 'Asia/Tokyo' })",
            "time.now({ timezone: 'UTC', ",
        ),
        // A literal that breaks the field's pattern; keys spread in from elsewhere.
        (
            "note.save({ label: \"Lena's Birthday\" })",
            "note.save({ label: \"Lena",
        ),
        ("note.save({ text: '  ' })", "note.save({ text: '  "),
        ("fs.list({ ...todo.list() })", "fs.list({ "),
        // parallel() takes declared tools only, each with its own input fields, and no
        // functions (it runs `{ tool, input }` objects).
        (
            "parallel([{ tool: \"weather\", input }])",
            "parallel([{ tool: \"",
        ),
        (
            "parallel([{ tool: 'fs.list', input: { depth: 1 } }])",
            "parallel([{ tool: 'fs.list', input: { ",
        ),
        ("parallel([() => fs.read({ path: 'a' })])", "parallel(["),
        // Tools return their results directly: an `async` wrapper would make them Promises.
        ("async function main() {}", ""),
        (
            "const read = async (p) => fs.read({ path: p });",
            "const read = ",
        ),
        ("const t = await time.now({});", "const t = "),
        ("const read = asyncinput => 1;", "const read = "),
        ("const t = awaitfs.read({});", "const t = "),
        // A read chained on a result that its tool does not declare.
        ("time.now({}).text", "time.now({})."),
        (
            "fs.list({ path: 'a' }).entries[0].filename",
            "fs.list({ path: 'a' }).entries[0].",
        ),
        ("fs.list({ path: 'a' }).files", "fs.list({ path: 'a' })."),
        // A read that starts a new line still goes on with the call before it.
        (
            "const e = fs.list({}).entries\n[0].filename",
            "const e = fs.list({}).entries\n[0].",
        ),
        // Not JavaScript, or not a program: prose before it unfenced, a second fence after
        // it, words alone before any program ran.
        ("Here is the program:\ndone(1)", "Here is the program:\n"),
        (
            "```js\ndone(1)\n```\nDone.\n```js\ndone(2)\n```",
            "```js\ndone(1)\n```\nDone.",
        ),
        ("Done.", "Done."),
        ("Tools I used:\n- fs.list({})", "Tools "),
        // A fence in the middle of a line: code mode would run it as code, backticks and all.
        ("Here it is: ```js\ndone(1)\n```", "Here it is: "),
        ("```js\ndone(1)```", "```js\ndone(1)"),
        // Statements are ended with `;` (the last one may leave it out): English does not
        // pass as a row of them, with `in` and `instanceof` as its joints.
        ("I indeed need `config` declared", "I in"),
        (
            "```\nparser in JavaScript. Here, I ```",
            "```\nparser in JavaScript. Here",
        ),
        // Names and numbers end: a run of digits cannot go on to the token limit.
        (
            "const fsReadOutput123456789012345678901234567890123456789012345678901234567890 = 1",
            "const fsReadOutput123456789012345678901234567890123456",
        ),
        ("const a = 1\nconst b = 2", "const a = 1\n"),
        // A fence of another language, and a program of comments alone.
        ("```json\n{ \"a\": 1 }\n```", "```js"),
        (
            "```javascript\n// fetch the record, then answer\n```",
            "```javascript\n// fetch the record, then answer\n",
        ),
        ("// nothing to do\n", "// nothing to do\n"),
    ] {
        match check(program) {
            Ok(()) => panic!("accepted: {program}"),
            Err(refused_after) => assert!(
                refused_after.starts_with(taken),
                "{program}: refused after {refused_after:?}, expected after {taken:?}"
            ),
        }
    }
}

#[test]
fn a_string_result_is_read_by_what_a_string_has() {
    for (program, taken) in [
        // A field a string result does not have.
        ("calc.area({}).area", "calc.area({}).a"),
        (
            "fs.read({ path: 'a' }).content.lines",
            "fs.read({ path: 'a' }).content.l",
        ),
    ] {
        match check(program) {
            Ok(()) => panic!("accepted: {program}"),
            Err(refused_after) => assert_eq!(refused_after, taken, "{program}"),
        }
    }
}

#[test]
fn after_a_program_ran_an_answer_may_be_words_but_no_code_hides_in_them() {
    let grammar = super::with_prose_answer(&grammar());
    for answer in [
        "Done.",
        "There are 5 files in logs/, 60 lines in all (the biggest is f3.log).",
        "The file notes/meeting.txt has been created. It says: Standup moves.",
        "Here is the program:\n\n```js\ndone(1)\n```\nIt ends the turn.",
        "done(\"still a program\")",
    ] {
        if let Err(taken) = check_with(&grammar, answer) {
            panic!("refused after {taken:?} in {answer}");
        }
    }
    for (answer, taken) in [
        (
            "Here is the program:\n```js\nfs.mkdir({})\n```",
            "Here is the program:\n```js\nfs.",
        ),
        ("Math.max(fs.mkdirSync(1))", "Math.max(fs."),
        (
            "Here it is: const fs = require('fs');",
            "Here it is: const fs ",
        ),
        ("fs.mkdirSync('x')", "fs."),
        ("done `x`", "done "),
        // Code on a line of its own in the words would be taken out of them and run.
        (
            "Here's the code:\n\nconst x = fs.mkdirSync('a')",
            "Here's the code:\n\n",
        ),
        ("You:\nconst fsReadOutput = 1", "You:\n"),
        ("Here's the code:\nfs.mkdir({})", "Here's the code:\n"),
    ] {
        match check_with(&grammar, answer) {
            Ok(()) => panic!("accepted: {answer}"),
            Err(refused_after) => assert!(
                refused_after.starts_with(taken),
                "{answer}: refused after {refused_after:?}, expected after {taken:?}"
            ),
        }
    }
    // Before any program ran, words are no reply.
    assert!(check("Done.").is_err());
    assert!(check("There are 5 files.").is_err());
}

#[test]
fn a_program_without_tools_still_has_a_grammar() {
    let grammar = program_grammar(&[], |_| None);
    let env = ApproximateTokEnv::single_byte_env();
    let factory = ParserFactory::new_simple(&env).unwrap();
    let matcher = Matcher::new(factory.create_parser(TopLevelGrammar::from_lark(grammar)));
    assert_eq!(matcher.get_error(), None);
}

#[test]
fn callable_names_are_the_engines_functions_and_the_tools_bindings() {
    let bindings = [binding("fs.list", Some("fsList"), json!({}))];
    let names = super::callable(&bindings);
    for name in [
        "parseInt", "Date", "Map", "Error", "done", "log", "parallel", "fsList",
    ] {
        assert!(names.iter().any(|known| known == name), "{name}: {names:?}");
    }
    // Objects are no functions; a namespace is called through (`fs.list(…)`).
    for name in ["Math", "JSON", "console", "fs", "tools", "globalThis"] {
        assert!(
            !names.iter().any(|known| known == name),
            "{name}: {names:?}"
        );
    }
}

#[test]
fn a_program_written_again_is_bare_code_without_words_or_a_fence() {
    for grammar in [grammar(), super::with_prose_answer(&grammar())] {
        let bare = super::bare_program(&grammar);
        if let Err(taken) = check_with(
            &bare,
            "const n = fs.read({ path: 'a' }).content.length;\ndone(`${n}`);",
        ) {
            panic!("refused after {taken:?}");
        }
        for (reply, taken) in [
            ("The program reads a.txt.\n```js\ndone(1)\n```", "The "),
            ("```js\ndone(1)\n```", "``"),
        ] {
            match check_with(&bare, reply) {
                Ok(()) => panic!("accepted: {reply}"),
                Err(refused_after) => assert_eq!(refused_after, taken, "{reply}"),
            }
        }
    }
}

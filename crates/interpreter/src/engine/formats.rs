//! **Text formats as data**: `TOML.parse`, `YAML.parse` and `CSV.parse`, beside `JSON.parse`.
//!
//! A model reads a config file or a table with `fs.read` and gets text. For JSON it writes
//! `JSON.parse(text)` and has data; for anything else it wrote `JSON.parse` anyway (refused,
//! with the format named) and then a parser of its own, line by line, that a 1.5B model gets
//! wrong more often than right: a variable declared inside the loop that found the section, a
//! header line summed as a number, a quoted field cut at its comma (config-port fails that way
//! in every round). What it needs is what Node and Python give in one line (`toml.parse`,
//! `yaml.load`, `csv.DictReader`), so the sandbox has them, under the names such libraries
//! use, parsed by the crates the rest of agentic uses (`toml`, `serde_yaml_ng`, `csv`):
//! - `TOML.parse(text)`: a TOML document as an object; dates and times as their text.
//! - `YAML.parse(text)`: one YAML document as the value it holds.
//! - `CSV.parse(text, options?)`: one object per row, keyed by the header line's names, with
//!   blanks around fields trimmed and a field that is a plain decimal number (`42`, `-3.5`, not
//!   `007` or `1e3`) as a number, unless `options.numbers` is false (`45.00` comes as 45, as
//!   from pandas). `options.separator` is one character (`","` by default); `options.header:
//!   false` gives every line as an array of fields instead. A row with more
//!   or fewer fields than the header is an error naming its line, not a row with a field lost.
//!
//! Text that is not in the format throws a `SyntaxError` naming the format and where the text
//! went wrong, as `JSON.parse` does; a value that is not text throws a `TypeError`. All three
//! are pure: the same text gives the same data in a replay.
//!
//! **The records of parsed data have the fields the data gives them** (`records`): in what
//! these parsers and `JSON.parse` give, every list of objects is a list of records, and reading
//! a field that no record of the list has throws at that line, as on a tool's result
//! (`typed.rs`), naming the fields there are: `` `invoices[i]` in the result of JSON.parse has
//! no field `isPaid`; its fields are number, customer, amount, paid ``. Such a read gives
//! `undefined` for every record, so a filter on it keeps all of them or none, and the answer
//! that follows looks right (unpaid-invoices, tuning, round 37). A field some record has is
//! read as usual (`undefined` where a record lacks it), and an object outside a list (a config
//! file) is not checked: `config.port || 8080` is how a default is written.

use boa_engine::object::{FunctionObjectBuilder, ObjectInitializer};
use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue, NativeFunction};
use serde_json::{Map, Value};

use super::NativeFunctionPointer;
use super::values::{MAX_VALUE_DEPTH, from_json, to_json};

/// Defines `TOML`, `YAML` and `CSV` in a fresh context.
pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let parsers: [(&str, NativeFunctionPointer); 3] = [
        ("TOML", toml_parse),
        ("YAML", yaml_parse),
        ("CSV", csv_parse),
    ];
    for (name, parse) in parsers {
        let function =
            FunctionObjectBuilder::new(context.realm(), NativeFunction::from_fn_ptr(parse))
                .name(JsString::from("parse"))
                .length(1)
                .build();
        let object = ObjectInitializer::new(context)
            .property(JsString::from("parse"), function, Attribute::all())
            .build();
        context.register_global_property(
            JsString::from(name),
            object,
            Attribute::WRITABLE | Attribute::CONFIGURABLE,
        )?;
    }
    watch_json_parse(context)
}

/// The text a parser was given, or the `TypeError` a value that is not text gets.
fn text_argument(format: &str, arguments: &[JsValue]) -> JsResult<String> {
    let given = arguments.first().cloned().unwrap_or_default();
    match given.as_string() {
        Some(text) => Ok(text.to_std_string_escaped()),
        None => {
            let what = if given.is_object() {
                "an object, which is data already: use it as it is, or parse the field that \
                 holds the text (a file's `content`)"
                    .to_owned()
            } else {
                format!("{}, not text", given.type_of())
            };
            Err(JsNativeError::typ()
                .with_message(format!("{format}.parse was given {what}"))
                .into())
        }
    }
}

fn syntax_error(format: &str, problem: String) -> boa_engine::JsError {
    JsNativeError::syntax()
        .with_message(format!(
            "{format}.parse: the text is not {format}: {problem}"
        ))
        .into()
}

/// The 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|byte| **byte == b'\n')
        .count()
        + 1
}

fn toml_parse(_: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = text_argument("TOML", arguments)?;
    let table = parse_toml(&text).map_err(|problem| syntax_error("TOML", problem))?;
    let data = from_json(&table, context)?;
    records(data, &table, "TOML.parse", context)
}

/// A TOML document as JSON: tables as objects, dates and times as their text.
pub(crate) fn parse_toml(text: &str) -> Result<Value, String> {
    let table: toml::Table = text.parse().map_err(|error: toml::de::Error| {
        let message = error.message().trim_end_matches('.').to_owned();
        match error.span() {
            Some(span) => format!("{message} at line {}", line_of(text, span.start)),
            None => message,
        }
    })?;
    Ok(toml_value(toml::Value::Table(table)))
}

fn toml_value(value: toml::Value) -> Value {
    match value {
        toml::Value::String(text) => Value::String(text),
        toml::Value::Integer(number) => Value::from(number),
        toml::Value::Float(number) => {
            serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
        }
        toml::Value::Boolean(flag) => Value::Bool(flag),
        toml::Value::Datetime(datetime) => Value::String(datetime.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_value).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(key, value)| (key, toml_value(value)))
                .collect(),
        ),
    }
}

fn yaml_parse(_: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = text_argument("YAML", arguments)?;
    let value = parse_yaml(&text).map_err(|problem| syntax_error("YAML", problem))?;
    let data = from_json(&value, context)?;
    records(data, &value, "YAML.parse", context)
}

/// One YAML document as JSON. Keys that are not text (`1: a`) become text; a value deeper
/// than the sandbox converts is refused rather than cut.
fn parse_yaml(text: &str) -> Result<Value, String> {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|error| {
        let message = error.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_owned();
        match error.location() {
            Some(location) => format!("{message} at line {}", location.line()),
            None => message,
        }
    })?;
    yaml_value(value, 0)
}

fn yaml_value(value: serde_yaml_ng::Value, depth: usize) -> Result<Value, String> {
    use serde_yaml_ng::Value as Yaml;
    if depth > MAX_VALUE_DEPTH {
        return Err(format!("it is nested deeper than {MAX_VALUE_DEPTH} levels"));
    }
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(flag) => Value::Bool(flag),
        Yaml::Number(number) => {
            if let Some(integer) = number.as_i64() {
                Value::from(integer)
            } else if let Some(integer) = number.as_u64() {
                Value::from(integer)
            } else {
                number
                    .as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Yaml::String(text) => Value::String(text),
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(|item| yaml_value(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(mapping) => {
            let mut object = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(text) => text,
                    other => match yaml_value(other, depth + 1)? {
                        Value::String(text) => text,
                        other => other.to_string(),
                    },
                };
                object.insert(key, yaml_value(value, depth + 1)?);
            }
            Value::Object(object)
        }
        Yaml::Tagged(tagged) => yaml_value(tagged.value, depth)?,
    })
}

fn csv_parse(_: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = text_argument("CSV", arguments)?;
    let options = match arguments.get(1) {
        None => Value::Null,
        Some(value) if value.is_undefined() || value.is_null() => Value::Null,
        Some(value) => to_json(value, context)?,
    };
    let options = CsvOptions::from_json(&options).map_err(|message| {
        boa_engine::JsError::from(
            JsNativeError::typ().with_message(format!("CSV.parse: {message}")),
        )
    })?;
    let rows = parse_csv(&text, options).map_err(|problem| syntax_error("CSV", problem))?;
    let value = from_json(&rows, context)?;
    records(value, &rows, "CSV.parse", context)
}

/// `value`, which `parser` gave as `data`, with reads of the records in its lists checked:
/// the fields of a list's records are those any of them has.
pub(super) fn records(
    value: JsValue,
    data: &Value,
    parser: &str,
    context: &mut Context,
) -> JsResult<JsValue> {
    let checked = shape_of(data, parser, "", context)?;
    super::typed::apply(value, &checked, context)
}

/// What of `data` (at `place` in it) is checked: each list of objects, as records.
fn shape_of(
    data: &Value,
    parser: &str,
    place: &str,
    context: &mut Context,
) -> JsResult<super::typed::Checked> {
    use super::typed::Checked;
    Ok(match data {
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            let place = format!("{place}[i]");
            let mut names: Vec<String> = Vec::new();
            for item in items.iter().filter_map(Value::as_object) {
                for name in item.keys() {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
            let mut fields = Vec::new();
            for name in &names {
                let inner = items
                    .iter()
                    .filter_map(|item| item.get(name))
                    .find(|inner| inner.is_object() || inner.is_array());
                if let Some(inner) = inner {
                    let at = format!("{place}.{name}");
                    fields.push((name.clone(), shape_of(inner, parser, &at, context)?));
                }
            }
            let handler = super::typed::handler(parser, &place, names, Vec::new(), context)?;
            Checked::List(Box::new(Checked::Record { handler, fields }))
        }
        Value::Object(map) => {
            let mut fields = Vec::new();
            for (name, inner) in map {
                if !(inner.is_object() || inner.is_array()) {
                    continue;
                }
                let at = if place.is_empty() {
                    name.clone()
                } else {
                    format!("{place}.{name}")
                };
                let inner = shape_of(inner, parser, &at, context)?;
                if !matches!(inner, Checked::Any) {
                    fields.push((name.clone(), inner));
                }
            }
            if fields.is_empty() {
                Checked::Any
            } else {
                Checked::Open(fields)
            }
        }
        _ => Checked::Any,
    })
}

/// Wraps `JSON.parse` of a fresh context so that the records of what it gives are checked
/// (`records`); a call with a reviver is left as it is.
fn watch_json_parse(context: &mut Context) -> JsResult<()> {
    let json = context
        .global_object()
        .get(JsString::from("JSON"), context)?;
    let Some(json) = json.as_object() else {
        return Ok(());
    };
    super::wrap_builtin(
        context,
        &json,
        "parse",
        |_, _, arguments, result, context| {
            let reviver = arguments.get(1).is_some_and(JsValue::is_callable);
            let text = arguments.first().and_then(JsValue::as_string);
            match text {
                Some(text) if !reviver && result.is_object() => {
                    match serde_json::from_str::<Value>(&text.to_std_string_escaped()) {
                        Ok(data) => records(result, &data, "JSON.parse", context),
                        Err(_) => Ok(result),
                    }
                }
                _ => Ok(result),
            }
        },
    )?;
    Ok(())
}

/// `CSV.parse`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CsvOptions {
    separator: u8,
    header: bool,
    numbers: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        Self {
            separator: b',',
            header: true,
            numbers: true,
        }
    }
}

impl CsvOptions {
    fn from_json(options: &Value) -> Result<Self, String> {
        let mut parsed = Self::default();
        let object = match options {
            Value::Null => return Ok(parsed),
            Value::Object(object) => object,
            _ => {
                return Err("its options are an object: { separator?: string, header?: \
                            boolean, numbers?: boolean }"
                    .into());
            }
        };
        for (key, value) in object {
            match (key.as_str(), value) {
                ("separator", Value::String(text)) if text.len() == 1 && text.is_ascii() => {
                    parsed.separator = text.as_bytes()[0];
                }
                ("separator", _) => {
                    return Err(
                        "`separator` is one character, such as \",\", \";\" or \"\\t\"".into(),
                    );
                }
                ("header", Value::Bool(flag)) => parsed.header = *flag,
                ("header", _) => return Err("`header` is true or false".into()),
                ("numbers", Value::Bool(flag)) => parsed.numbers = *flag,
                ("numbers", _) => return Err("`numbers` is true or false".into()),
                (other, _) => {
                    return Err(format!(
                        "it takes no option `{other}`; its options are `separator`, `header` \
                         and `numbers`"
                    ));
                }
            }
        }
        Ok(parsed)
    }
}

/// Rows of CSV text as JSON: objects keyed by the header line (or, without one, arrays).
fn parse_csv(text: &str, options: CsvOptions) -> Result<Value, String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(options.separator)
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| error.to_string())?;
        let line = record.position().map_or(0, |position| position.line());
        let fields: Vec<&str> = record.iter().collect();
        if !options.header {
            let fields = fields
                .into_iter()
                .map(|field| csv_field(field, options.numbers));
            rows.push(Value::Array(fields.collect()));
            continue;
        }
        let Some(names) = &header else {
            header = Some(fields.iter().map(|name| (*name).to_owned()).collect());
            continue;
        };
        if fields.len() != names.len() {
            return Err(format!(
                "line {line} has {} fields where the header line has {} ({})",
                fields.len(),
                names.len(),
                names.join(", ")
            ));
        }
        let row: Map<String, Value> = names
            .iter()
            .cloned()
            .zip(
                fields
                    .into_iter()
                    .map(|field| csv_field(field, options.numbers)),
            )
            .collect();
        rows.push(Value::Object(row));
    }
    Ok(Value::Array(rows))
}

/// A field as a number when `numbers` is on and it is written as a plain decimal one (`42`,
/// `-3.5`, `0.25`), so that sums and comparisons work; otherwise as it is. `007` stays text (a
/// code, not seven).
fn csv_field(field: &str, numbers: bool) -> Value {
    if !numbers {
        return Value::String(field.to_owned());
    }
    let digits = field.strip_prefix('-').unwrap_or(field);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let plain = !whole.is_empty()
        && whole.bytes().all(|byte| byte.is_ascii_digit())
        && (whole == "0" || !whole.starts_with('0'))
        && (!digits.contains('.')
            || (!fraction.is_empty() && fraction.bytes().all(|byte| byte.is_ascii_digit())));
    if plain
        && let Ok(number) = field.parse::<f64>()
        && let Some(number) = serde_json::Number::from_f64(number)
    {
        // Whole numbers as integers, as JSON.parse gives them.
        if !digits.contains('.')
            && let Ok(integer) = field.parse::<i64>()
        {
            return Value::from(integer);
        }
        return Value::Number(number);
    }
    Value::String(field.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::outcome;
    use serde_json::json;

    #[test]
    fn a_config_file_in_toml_is_data() {
        let code = "const config = TOML.parse(\"# Service\\n[server]\\nport = 8080\\n\\n\
                    [database]\\nhost = \\\"db.internal\\\"\\nport = 5433\\n\
                    started = 2026-03-01T10:00:00Z\\n\");\n\
                    `${config.database.port} ${config.server.port} ${config.database.started}`";
        assert_eq!(
            outcome(code).unwrap(),
            json!("5433 8080 2026-03-01T10:00:00Z")
        );
    }

    #[test]
    fn text_not_in_the_format_says_where_it_went_wrong() {
        let error = outcome("TOML.parse(\"[a]\\nhost = db.internal\\n\")").unwrap_err();
        assert!(
            error.starts_with("SyntaxError: TOML.parse: the text is not TOML: ")
                && error.contains("at line 2"),
            "{error}"
        );
        let error = outcome("YAML.parse(\"a: [1, 2\\nb: 3\")").unwrap_err();
        assert!(
            error.starts_with("SyntaxError: YAML.parse: the text is not YAML: "),
            "{error}"
        );
        let error = outcome("CSV.parse(\"name,age\\nAda,36\\nBob\\n\")").unwrap_err();
        assert!(
            error.contains("line 3 has 1 fields where the header line has 2 (name, age)"),
            "{error}"
        );
        let error = outcome("CSV.parse({ content: \"a,b\" })").unwrap_err();
        assert!(
            error.starts_with("TypeError: CSV.parse was given an object, which is data already"),
            "{error}"
        );
    }

    #[test]
    fn a_field_no_record_of_parsed_data_has_throws_naming_the_fields() {
        let invoices = "const data = JSON.parse('{\"invoices\": [{\"customer\": \"Sol\", \"amount\": 1200, \"paid\": true}, {\"customer\": \"Nord\", \"amount\": 900, \"paid\": false, \"note\": \"late\"}]}');\n";
        let error = outcome(&format!(
            "{invoices}data.invoices.filter((invoice) => !invoice.isPaid).length"
        ))
        .unwrap_err();
        assert!(
            error.starts_with(
                "TypeError: `invoices[i]` in the result of JSON.parse has no field `isPaid`; \
                 its fields are customer, amount, paid, note"
            ),
            "{error}"
        );
        // A field some record has reads as usual, and so does the object around the list
        // (a default for a setting is written that way).
        assert_eq!(
            outcome(&format!(
                "{invoices}`${{data.invoices.filter((invoice) => !invoice.paid).length}} ${{data.invoices.map((invoice) => invoice.note || '-').join(' ')}} ${{data.currency || 'EUR'}} ${{JSON.stringify(data.invoices[0])}}`"
            ))
            .unwrap(),
            json!("1 - late EUR {\"customer\":\"Sol\",\"amount\":1200,\"paid\":true}")
        );
        let error = outcome("CSV.parse(\"name,city\\nAda,Oslo\\n\").map((row) => row.Name)[0]")
            .unwrap_err();
        assert!(
            error.starts_with(
                "TypeError: `[i]` in the result of CSV.parse has no field `Name`; its fields are name, city"
            ),
            "{error}"
        );
        // A reviver's data is its own.
        assert_eq!(
            outcome("JSON.parse('[{\"a\": 1}]', (key, value) => value)[0].b === undefined")
                .unwrap(),
            json!(true)
        );
    }

    #[test]
    fn a_yaml_document_is_data() {
        let code = "const doc = YAML.parse(\"name: auth\\nport: 8080\\nhosts:\\n  - a\\n  - b\\n\");\n\
                    `${doc.name} ${doc.port + 1} ${doc.hosts.length}`";
        assert_eq!(outcome(code).unwrap(), json!("auth 8081 2"));
    }

    #[test]
    fn csv_rows_are_objects_keyed_by_the_header_with_numbers_as_numbers() {
        assert_eq!(
            parse_csv(
                "name, city ,hours,zip\nAda,\"London, UK\",4.5,007\nBob,Oslo,-3,0150\n\n",
                CsvOptions::default()
            )
            .unwrap(),
            json!([
                { "name": "Ada", "city": "London, UK", "hours": 4.5, "zip": "007" },
                { "name": "Bob", "city": "Oslo", "hours": -3, "zip": "0150" },
            ])
        );
        let code = "const rows = CSV.parse(\"date;hours\\n2026-06-01;4\\n2026-06-02;3.5\\n\", { separator: \";\" });\n\
                    rows.reduce((sum, row) => sum + row.hours, 0)";
        assert_eq!(outcome(code).unwrap(), json!(7.5));
        let code = "CSV.parse(\"a,1\\nb,2\", { header: false }).map(row => row[1]).join(\"+\")";
        assert_eq!(outcome(code).unwrap(), json!("1+2"));
        let error = outcome("CSV.parse(\"a\", { sep: \";\" })").unwrap_err();
        assert!(error.contains("it takes no option `sep`"), "{error}");
    }

    #[test]
    fn only_plain_decimal_fields_become_numbers() {
        for (field, number) in [("0", json!(0)), ("12", json!(12)), ("-0.5", json!(-0.5))] {
            assert_eq!(csv_field(field, true), number, "{field}");
            assert_eq!(csv_field(field, false), json!(field), "{field}");
        }
        for field in [
            "007", "1e3", "1.", ".5", "12px", "", "-", "1,5", "0x10", "+4",
        ] {
            assert_eq!(csv_field(field, true), json!(field), "{field}");
        }
    }
}

//! The protobuf text format of `.prototxt` files, parsed and printed through
//! prost-reflect against `caffe.proto`, into and out of the generated types.
//! It owns turning prost-reflect's errors into ones that name the file, the
//! line, the field and what to write instead, and going on past a bad field
//! to find the file's other problems; it must never check what a value
//! means (`net.rs` and `solver.rs` do).

use std::path::Path;

use miette::Diagnostic;
use prost::Message as _;
use prost_reflect::text_format::FormatOptions;
use prost_reflect::{DynamicMessage, MessageDescriptor};

use crate::error::Result;
use crate::proto::locate::{self, Locations};
use crate::proto::problems::{Problems, LIMIT};

/// Parses `src` as the schema's message `name` (`"NetParameter"`), with the
/// lines of its fields. Every field unknown to the schema, bad enum value
/// and bad value is reported (up to the problem limit), each at its line.
pub fn parse<T: prost::Message + Default>(src: &str, file: &Path, name: &str) -> Result<(T, Locations)> {
    let desc = super::descriptor(name);
    let mut text = src.to_string();
    let mut problems = Problems::new(file);
    // Past the reporting limit problems are only counted, and not forever.
    for _ in 0..10 * LIMIT {
        match DynamicMessage::parse_text_format(desc.clone(), &text) {
            Ok(msg) if problems.is_empty() => {
                let parsed = T::decode(msg.encode_to_vec().as_slice())
                    .expect("a message prost-reflect built decodes as the generated type");
                return Ok((parsed, Locations::index(src)));
            }
            Ok(_) => break,
            Err(e) => {
                let offset = e.labels().and_then(|mut l| l.next()).map(|l| l.offset());
                let (line, msg) = explain(&text, offset, &e.to_string());
                problems.push(line, msg);
                // Step past the field at fault and look for more problems.
                let Some(range) = offset.and_then(|o| bad_field(&text, o, &e.to_string())) else { break };
                blank(&mut text, range);
            }
        }
    }
    problems.finish()?;
    unreachable!("problems were found")
}

/// The extent of the field an error is about, when going on past it is safe.
fn bad_field(text: &str, offset: usize, what: &str) -> Option<std::ops::Range<usize>> {
    if what.starts_with("field '") {
        return locate::field_extent(text, offset);
    }
    // A bad value: skip its whole field, found from the value.
    let syntax = what.starts_with("expected ':'") || what.contains("a field name");
    if syntax {
        return None;
    }
    let (_, start) = locate::field_at(text, offset)?;
    locate::field_extent(text, start)
}

/// Replaces a range by blanks, keeping line breaks (and so line numbers).
fn blank(text: &mut String, range: std::ops::Range<usize>) {
    let blanked: String = text[range.clone()].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
    text.replace_range(range, &blanked);
}

/// The type name without the package (`ConvolutionParameter.Engine`).
fn short(name: &str) -> &str {
    name.strip_prefix("caffe.").unwrap_or(name)
}

/// Text between the first two occurrences of `'` after `after`.
fn quoted<'a>(s: &'a str, after: &str) -> Option<&'a str> {
    let rest = &s[s.find(after)? + after.len()..];
    let start = rest.find('\'')? + 1;
    let end = rest[start..].find('\'')? + start;
    Some(&rest[start..end])
}

/// The line and our wording of a prost-reflect error.
fn explain(text: &str, offset: Option<usize>, what: &str) -> (usize, String) {
    let Some(offset) = offset else {
        // Only the end of the input has no position: something is not closed.
        return match locate::unclosed(text) {
            Some(line) => (line, format!("the `{{` on line {line} is not closed (found the end of the file)")),
            None => (locate::line_of(text, text.len()), format!("the file ends too early: {what}")),
        };
    };
    let line = locate::line_of(text, offset);
    let field = locate::field_at(text, offset).map(|f| f.0);
    if let (Some(name), Some(message)) = (quoted(what, "field "), quoted(what, "for message ")) {
        return (line, unknown_field(name, message));
    }
    // The one enum field named `type` is a V1 layer's (every other `type` is a string).
    if field.as_deref() == Some("type") && what.starts_with("expected an enum value") {
        return (
            line,
            "a V1 `layers` entry names its type without quotes (`type: CONVOLUTION`); or write it as \
             `layer { type: \"Convolution\" ... }`"
                .into(),
        );
    }
    if let (Some(value), Some(enum_name)) = (quoted(what, "value "), quoted(what, "for enum ")) {
        let allowed = super::pool()
            .get_enum_by_name(enum_name)
            .map(|e| e.values().map(|v| v.name().to_string()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        let field = field.map_or(String::new(), |f| format!("field `{f}`: "));
        return (line, format!("{field}`{value}` is not a {}; use one of {allowed}", short(enum_name)));
    }
    if let Some(name) = quoted(what, "") {
        if what.ends_with("is already set") {
            return (line, format!("field `{name}` is given twice; give it once"));
        }
    }
    let Some(field) = field else { return (line, syntax(what)) };
    if what.starts_with("expected a string") {
        let found = quoted(what, "but found ").unwrap_or("");
        return (line, format!("field `{field}` needs a quoted string: write `{field}: \"{found}\"`"));
    }
    (line, format!("field `{field}`: {}", syntax(what)))
}

/// A syntax error in our words.
fn syntax(what: &str) -> String {
    what.replace("but found", "found").replace("expected ':' or a message value", "expected `:` after the field name")
}

/// "unknown field" with the closest field the message has, as a hint.
fn unknown_field(name: &str, message: &str) -> String {
    let short_msg = short(message);
    if short_msg == "V1LayerParameter" && name == "layer" {
        return "this net uses Caffe's V0 format (`layers { layer { ... } }`), which caffe-geeps does not read; \
                convert it with Caffe's upgrade_net_proto_text"
            .into();
    }
    let hint = super::pool()
        .get_message_by_name(message)
        .and_then(|m| closest(&m, name))
        .map_or(String::new(), |c| format!("; did you mean `{c}`?"));
    format!("unknown field `{name}` in {short_msg}{hint}")
}

/// The field of `m` nearest to `name` by edit distance, if near enough.
fn closest(m: &MessageDescriptor, name: &str) -> Option<String> {
    m.fields()
        .map(|f| (edit_distance(f.name(), name), f.name().to_string()))
        .filter(|(d, _)| *d <= 2.max(name.len() / 4))
        .min()
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Prints a message of the schema (`name`, as for `parse`) in the text format.
pub fn print<T: prost::Message>(msg: &T, name: &str) -> String {
    let dynamic = DynamicMessage::decode(super::descriptor(name), msg.encode_to_vec().as_slice())
        .expect("a generated message decodes against its own descriptor");
    dynamic.to_text_format_with_options(&FormatOptions::new().pretty(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::caffe::{NetParameter, SolverParameter};

    fn problems(src: &str) -> String {
        match parse::<SolverParameter>(src, Path::new("s.prototxt"), "SolverParameter") {
            Ok(_) => panic!("expected problems in:\n{src}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_problem_of_a_file_in_one_run() {
        let e = problems("base_lr: 0.1\nlr_polcy: \"fixed\"\nsolver_mode: TPU\nmax_iter: five\nmomentm: { a: 1 }\n");
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 4, "{e}");
        assert!(lines[0]
            .starts_with("s.prototxt:2: unknown field `lr_polcy` in SolverParameter; did you mean `lr_policy`?"));
        assert!(
            lines[1].starts_with(
                "s.prototxt:3: field `solver_mode`: `TPU` is not a SolverParameter.SolverMode; use one of CPU, GPU"
            ),
            "{e}"
        );
        assert!(lines[2].starts_with("s.prototxt:4: field `max_iter`"), "{e}");
        assert!(lines[3].starts_with("s.prototxt:5: unknown field `momentm`"), "{e}");
    }

    #[test]
    fn the_limit_holds() {
        let src: String = (0..40).map(|i| format!("bad{i}: 1\n")).collect();
        let e = problems(&src);
        assert_eq!(e.lines().count(), crate::proto::problems::LIMIT + 1, "{e}");
        assert!(e.lines().last().unwrap().ends_with("and 20 more problem(s) past these"), "{e}");
    }

    #[test]
    fn print_and_parse_round_trip() {
        let src =
            "name: \"n\"\nlayer { name: \"c\" type: \"Convolution\" convolution_param { num_output: 3 kernel_size: 2 \
                   weight_filler { type: \"xavier\" } } include { phase: TRAIN } }\n";
        let (net, _) = parse::<NetParameter>(src, Path::new("n"), "NetParameter").unwrap();
        let printed = print(&net, "NetParameter");
        assert!(printed.contains("phase: TRAIN"), "{printed}");
        let (again, _) = parse::<NetParameter>(&printed, Path::new("n"), "NetParameter").unwrap();
        assert_eq!(net, again);
        assert_eq!(net.layer[0].convolution_param.as_ref().unwrap().kernel_size, [2]);
    }
}

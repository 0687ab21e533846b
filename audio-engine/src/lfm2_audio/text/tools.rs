//! LFM2's tool format: the tool list goes in the system turn, and the model writes its calls in
//! the reply's text as a Python-style list between two special tokens.
//!
//! ```text
//! <|im_start|>system
//! {instructions}
//! List of tools: <|tool_list_start|>[{"name": ..., "description": ..., "parameters": {...}}]<|tool_list_end|><|im_end|>
//! ...
//! <|im_start|>assistant
//! <|tool_call_start|>[get_weather(city="Paris", days=2)]<|tool_call_end|>Checking the weather.<|im_end|>
//! ```
//!
//! A tool's result is a turn of its own after the reply that called it, its text between the
//! response markers:
//!
//! ```text
//! <|im_start|>tool
//! <|tool_response_start|>{"temperature": 21}<|tool_response_end|><|im_end|>
//! ```
//!
//! [`tool_system_prompt`] writes the system turn's text; [`CallSplitter`] separates a streamed
//! reply's text from its calls, and [`parse_calls`] reads one call block into names and JSON
//! arguments; [`write_calls`] writes calls back in the model's form (a call a client holds as
//! history) and [`tool_response`] a result's text. The special tokens are the checkpoint's own (LFM2's vocabulary, ids 8-13), so
//! the prompt builders' special-token parsing turns the markers into single tokens.

use serde_json::{Map, Number, Value};

/// Opens the tool list in the system turn.
pub const TOOL_LIST_START: &str = "<|tool_list_start|>";
/// Closes the tool list.
pub const TOOL_LIST_END: &str = "<|tool_list_end|>";
/// Opens a block of calls in the reply.
pub const TOOL_CALL_START: &str = "<|tool_call_start|>";
/// Closes a block of calls.
pub const TOOL_CALL_END: &str = "<|tool_call_end|>";
/// Opens a tool's result in its turn.
pub const TOOL_RESPONSE_START: &str = "<|tool_response_start|>";
/// Closes a tool's result.
pub const TOOL_RESPONSE_END: &str = "<|tool_response_end|>";

/// A tool result's turn text: `output` (what the tool returned, as the client sends it)
/// between the response markers.
pub fn tool_response(output: &str) -> String {
    format!("{TOOL_RESPONSE_START}{output}{TOOL_RESPONSE_END}")
}

/// `calls` as the model writes them in a reply: one block, `[name(key=value, ...), ...]`
/// between the call markers, values as Python literals (strings in double quotes, `True`,
/// `False`, `None`), so that [`parse_calls`] reads back the same names and arguments.
pub fn write_calls(calls: &[ToolCall]) -> String {
    let list: Vec<String> = calls
        .iter()
        .map(|c| {
            let args: Vec<String> = c
                .arguments
                .iter()
                .map(|(k, v)| format!("{k}={}", py_literal(v)))
                .collect();
            format!("{}({})", c.name, args.join(", "))
        })
        .collect();
    format!("{TOOL_CALL_START}[{}]{TOOL_CALL_END}", list.join(", "))
}

/// `v` as a Python literal (what `repr` of the parsed JSON would give, with double quotes).
fn py_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), py_literal(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// The system turn's text with `tools` (OpenAI function definitions: `{"name", "description",
/// "parameters"}`, or chat's `{"type": "function", "function": {...}}`) listed in LFM2's form
/// after `instructions`. Without tools it is `instructions` unchanged (the prompt's bytes stay
/// those of a conversation without tools).
pub fn tool_system_prompt(instructions: &str, tools: &[Value]) -> String {
    if tools.is_empty() {
        return instructions.to_owned();
    }
    let list: Vec<String> = tools.iter().map(definition).collect();
    let lead = if instructions.is_empty() {
        String::new()
    } else {
        format!("{instructions}\n")
    };
    format!(
        "{lead}List of tools: {TOOL_LIST_START}[{}]{TOOL_LIST_END}",
        list.join(", ")
    )
}

/// Whether a system prompt lists tools (holds [`TOOL_LIST_START`]): a reply to it may call them.
pub fn lists_tools(system_prompt: &str) -> bool {
    system_prompt.contains(TOOL_LIST_START)
}

/// One tool's `{"name", "description", "parameters"}` (in that order), whichever OpenAI shape
/// it came in, written as the checkpoint's chat template writes it (Python's `json.dumps`:
/// `", "` and `": "` between items, non-ASCII kept).
fn definition(tool: &Value) -> String {
    let f = tool.get("function").unwrap_or(tool);
    let fields: Vec<String> = ["name", "description", "parameters"]
        .into_iter()
        .filter_map(|key| Some(format!("\"{key}\": {}", py_json(f.get(key)?))))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// `v` as Python's `json.dumps` writes it by default (`ensure_ascii` aside).
fn py_json(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_json).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), py_json(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// One call the model wrote: the function's name and its keyword arguments as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// The arguments, by name.
    pub arguments: Map<String, Value>,
}

/// A call block the model wrote that is not a list of calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable tool call `{text}`: {reason}")]
pub struct ToolCallError {
    /// What was wrong.
    pub reason: String,
    /// The block's text.
    pub text: String,
}

/// Reads a call block's text (`[name(key=value, ...), ...]`) into calls. Values are Python
/// literals as LFM2 writes them: strings (either quote), numbers, `True`/`False`/`None`, lists
/// and dicts (JSON spellings accepted too).
pub fn parse_calls(text: &str) -> Result<Vec<ToolCall>, ToolCallError> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    p.calls().map_err(|reason| ToolCallError {
        reason,
        text: text.to_owned(),
    })
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

type Parsed<T> = Result<T, String>;

impl Parser<'_> {
    fn calls(&mut self) -> Parsed<Vec<ToolCall>> {
        self.eat(b'[')?;
        let mut calls = Vec::new();
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                calls.push(self.call()?);
                self.space();
                match self.next() {
                    Some(b',') => continue,
                    Some(b']') => break,
                    _ => return Err(self.expected("`,` or `]` after a call")),
                }
            }
        }
        self.space();
        if self.at != self.s.len() {
            return Err(self.expected("the end after the list"));
        }
        Ok(calls)
    }

    fn call(&mut self) -> Parsed<ToolCall> {
        self.space();
        let name = self.name()?;
        self.eat(b'(')?;
        let mut arguments = Map::new();
        self.space();
        if self.peek() == Some(b')') {
            self.at += 1;
            return Ok(ToolCall { name, arguments });
        }
        loop {
            self.space();
            let key = self.name()?;
            self.eat(b'=')?;
            let value = self.value()?;
            if arguments.insert(key.clone(), value).is_some() {
                return Err(format!("argument `{key}` given twice"));
            }
            self.space();
            match self.next() {
                Some(b',') => continue,
                Some(b')') => return Ok(ToolCall { name, arguments }),
                _ => return Err(self.expected("`,` or `)` after an argument")),
            }
        }
    }

    /// An identifier (dots allowed, as in `module.function`).
    fn name(&mut self) -> Parsed<String> {
        let start = self.at;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-' {
                self.at += 1;
            } else {
                break;
            }
        }
        if start == self.at || self.s[start].is_ascii_digit() {
            return Err(self.expected("a name"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }

    fn value(&mut self) -> Parsed<Value> {
        self.space();
        match self.peek() {
            Some(b'"' | b'\'') => self.string().map(Value::String),
            Some(b'[') => self.list(),
            Some(b'{') => self.dict(),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => {
                let word = self.name()?;
                match word.as_str() {
                    "True" | "true" => Ok(Value::Bool(true)),
                    "False" | "false" => Ok(Value::Bool(false)),
                    "None" | "null" => Ok(Value::Null),
                    w => Err(format!("unknown value `{w}`")),
                }
            }
            None => Err(self.expected("a value")),
        }
    }

    fn string(&mut self) -> Parsed<String> {
        let quote = self.next().ok_or_else(|| self.expected("a string"))?;
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err("a string without its closing quote".into()),
                Some(c) if c == quote => break,
                Some(b'\\') => {
                    let c = self.next().ok_or("a string ending in `\\`")?;
                    match c {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'u' => {
                            let hex = self
                                .s
                                .get(self.at..self.at + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or("a bad `\\u` escape")?;
                            self.at += 4;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(hex.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                Some(c) => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| "a string that is not UTF-8".into())
    }

    fn number(&mut self) -> Parsed<Value> {
        let start = self.at;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.at += 1;
            } else {
                break;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("bad number `{text}`"))
    }

    fn list(&mut self) -> Parsed<Value> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        loop {
            self.space();
            if self.peek() == Some(b']') {
                self.at += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {}
                _ => return Err(self.expected("`,` or `]` in a list")),
            }
        }
    }

    fn dict(&mut self) -> Parsed<Value> {
        self.eat(b'{')?;
        let mut map = Map::new();
        loop {
            self.space();
            if self.peek() == Some(b'}') {
                self.at += 1;
                return Ok(Value::Object(map));
            }
            let key = self.string()?;
            self.eat(b':')?;
            let v = self.value()?;
            map.insert(key, v);
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err(self.expected("`,` or `}` in a dict")),
            }
        }
    }

    fn eat(&mut self, c: u8) -> Parsed<()> {
        self.space();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.expected(&format!("`{}`", c as char)))
        }
    }

    fn space(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.at += usize::from(c.is_some());
        c
    }

    fn expected(&self, what: &str) -> String {
        format!("expected {what} at byte {}", self.at)
    }
}

/// A piece of a streamed reply's text: what the listener hears or reads, or a call block.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyPiece {
    /// Text outside call blocks.
    Text(String),
    /// One call block, read.
    Calls(Result<Vec<ToolCall>, ToolCallError>),
}

/// Splits a reply's text, fed in the pieces it streams in, into text and call blocks. A marker
/// split across pieces is held back until it is whole; text that only looks like the start of
/// a marker is released as soon as it cannot be one.
#[derive(Debug, Default)]
pub struct CallSplitter {
    held: String,
    in_call: bool,
}

impl CallSplitter {
    /// A splitter at the start of a reply.
    pub fn new() -> CallSplitter {
        CallSplitter::default()
    }

    /// Feeds the next piece of text; returns what is now certain.
    pub fn push(&mut self, piece: &str) -> Vec<ReplyPiece> {
        self.held.push_str(piece);
        let mut out = Vec::new();
        loop {
            let marker = if self.in_call {
                TOOL_CALL_END
            } else {
                TOOL_CALL_START
            };
            if let Some(at) = self.held.find(marker) {
                let before: String = self.held.drain(..at).collect();
                self.held.drain(..marker.len());
                if self.in_call {
                    out.push(ReplyPiece::Calls(parse_calls(before.trim())));
                } else if !before.is_empty() {
                    out.push(ReplyPiece::Text(before));
                }
                self.in_call = !self.in_call;
                continue;
            }
            if !self.in_call {
                // why: keep only a tail that could still grow into the marker.
                let keep = partial_marker_len(&self.held, marker);
                let cut = self.held.len() - keep;
                if cut > 0 {
                    out.push(ReplyPiece::Text(self.held.drain(..cut).collect()));
                }
            }
            return out;
        }
    }

    /// The end of the reply: held text is released; an unclosed call block is an error.
    pub fn finish(&mut self) -> Vec<ReplyPiece> {
        let rest = std::mem::take(&mut self.held);
        if self.in_call {
            self.in_call = false;
            return vec![ReplyPiece::Calls(Err(ToolCallError {
                reason: format!("the reply ended before {TOOL_CALL_END}"),
                text: rest,
            }))];
        }
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![ReplyPiece::Text(rest)]
        }
    }
}

/// The length of the longest suffix of `s` that is a proper prefix of `marker` (at a character
/// boundary).
fn partial_marker_len(s: &str, marker: &str) -> usize {
    (1..marker.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && marker.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_go_in_the_system_turn_in_lfm2_form() {
        let tools = [
            json!({"type": "function", "name": "get_weather", "description": "Weather now",
                   "parameters": {"properties": {"city": {"type": "string"}}}}),
            json!({"type": "function", "function": {"name": "add", "parameters": {}}}),
        ];
        assert_eq!(
            tool_system_prompt("Be brief.", &tools),
            "Be brief.\nList of tools: <|tool_list_start|>[{\"name\": \"get_weather\", \
             \"description\": \"Weather now\", \"parameters\": {\"properties\": {\"city\": \
             {\"type\": \"string\"}}}}, {\"name\": \"add\", \
             \"parameters\": {}}]<|tool_list_end|>"
        );
        assert_eq!(tool_system_prompt("Be brief.", &[]), "Be brief.");
        assert!(tool_system_prompt("", &tools).starts_with("List of tools: "));
    }

    #[test]
    fn python_style_calls_become_json_arguments() {
        let calls = parse_calls(
            r#"[get_weather(city="Paris", days=2, metric=True, note=None), ping(),
                 book(who=['a', "b"], at={"h": 9.5, 'm': -1}, text='it\'s')]"#,
        )
        .unwrap();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            Value::Object(calls[0].arguments.clone()),
            json!({"city": "Paris", "days": 2, "metric": true, "note": null})
        );
        assert_eq!(calls[1].name, "ping");
        assert!(calls[1].arguments.is_empty());
        assert_eq!(
            Value::Object(calls[2].arguments.clone()),
            json!({"who": ["a", "b"], "at": {"h": 9.5, "m": -1}, "text": "it's"})
        );
        assert_eq!(parse_calls("[]").unwrap(), vec![]);
    }

    #[test]
    fn written_calls_read_back_the_same() {
        let args = |v: Value| v.as_object().unwrap().clone();
        let calls = vec![
            ToolCall {
                name: "get_weather".into(),
                arguments: args(json!({"city": "Paris \"Nord\"", "days": 2, "metric": true})),
            },
            ToolCall {
                name: "note".into(),
                arguments: args(json!({"tags": ["a", null], "at": {"x": 1.5}})),
            },
            ToolCall {
                name: "ping".into(),
                arguments: Map::new(),
            },
        ];
        let text = write_calls(&calls);
        assert!(
            text.starts_with(TOOL_CALL_START) && text.ends_with(TOOL_CALL_END),
            "{text}"
        );
        assert!(
            text.contains("metric=True") && text.contains("None"),
            "{text}"
        );
        let inner = &text[TOOL_CALL_START.len()..text.len() - TOOL_CALL_END.len()];
        assert_eq!(parse_calls(inner).unwrap(), calls);
        assert_eq!(
            tool_response("{\"t\": 21}"),
            "<|tool_response_start|>{\"t\": 21}<|tool_response_end|>"
        );
    }

    #[test]
    fn malformed_blocks_say_why() {
        for bad in [
            "get_weather(city='x')",
            "[get_weather(city='x')",
            "[get_weather(city=)]",
            "[f(a=1, a=2)]",
            "[f(a='open)]",
            "[f(a=maybe)]",
            "[f(a=1)] trailing",
        ] {
            let e = parse_calls(bad).unwrap_err();
            assert_eq!(e.text, bad);
            assert!(!e.reason.is_empty(), "{bad}");
        }
    }

    #[test]
    fn the_splitter_separates_text_and_calls_across_pieces() {
        let reply =
            "Sure. <|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>Checking now.";
        // Every split point gives the same pieces once joined.
        for cut in 0..=reply.len() {
            if !reply.is_char_boundary(cut) {
                continue;
            }
            let mut s = CallSplitter::new();
            let mut out = s.push(&reply[..cut]);
            out.extend(s.push(&reply[cut..]));
            out.extend(s.finish());
            let text: String = out
                .iter()
                .filter_map(|p| match p {
                    ReplyPiece::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(text, "Sure. Checking now.", "cut {cut}");
            let calls: Vec<_> = out
                .iter()
                .filter_map(|p| match p {
                    ReplyPiece::Calls(c) => Some(c.clone().unwrap()),
                    _ => None,
                })
                .collect();
            assert_eq!(calls.len(), 1, "cut {cut}");
            assert_eq!(calls[0][0].name, "get_weather");
        }
    }

    #[test]
    fn text_that_only_looks_like_a_marker_is_released() {
        let mut s = CallSplitter::new();
        assert_eq!(s.push("a <|tool"), vec![ReplyPiece::Text("a ".into())]);
        assert_eq!(
            s.push("box|> b"),
            vec![ReplyPiece::Text("<|toolbox|> b".into())]
        );
        assert!(s.finish().is_empty());
        let mut s = CallSplitter::new();
        s.push("<|tool_call_start|>[f(");
        let end = s.finish();
        assert!(matches!(&end[..], [ReplyPiece::Calls(Err(e))] if e.text == "[f("));
    }
}

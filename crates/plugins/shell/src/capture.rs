//! Turning a terminal's byte stream into the text a model reads: UTF-8 decoded across reads,
//! line ends normalised, and capped by keeping the start and the end.

use std::collections::VecDeque;

/// Collects output as it arrives. A terminal ends lines with `\r\n`; those (and any run of
/// `\r` right before a `\n`, which shows nothing) become `\n`. A lone `\r`, as progress bars
/// use, is kept.
#[derive(Debug)]
pub struct Capture {
    head: String,
    head_chars: usize,
    head_limit: usize,
    tail: VecDeque<char>,
    tail_limit: usize,
    total_chars: usize,
    /// The start of a UTF-8 sequence whose rest has not been read yet.
    undecoded: Vec<u8>,
    /// Carriage returns not yet known to end a line.
    carriage_returns: usize,
}

/// The collected output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// All of it, or its first and last parts with a line in between saying how much was cut.
    pub text: String,
    pub truncated: bool,
    /// Characters the command printed, after normalising.
    pub total_chars: usize,
}

impl Capture {
    /// Keeps at most `limit` characters: the first half and the last half.
    pub fn new(limit: usize) -> Self {
        let head_limit = limit / 2;
        Self {
            head: String::new(),
            head_chars: 0,
            head_limit,
            tail: VecDeque::new(),
            tail_limit: limit - head_limit,
            total_chars: 0,
            undecoded: Vec::new(),
            carriage_returns: 0,
        }
    }

    /// Adds raw bytes and returns the new text they complete, for live display.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.undecoded.extend_from_slice(bytes);
        let data = std::mem::take(&mut self.undecoded);
        let mut decoded = String::new();
        let mut rest = data.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    decoded.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    decoded.push_str(&String::from_utf8_lossy(valid));
                    match error.error_len() {
                        Some(bad) => {
                            decoded.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // An incomplete sequence at the end: its rest comes with the next read.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.undecoded = rest.to_vec();
        self.add_text(&decoded)
    }

    /// Ends the output: what was held back is added, and the whole is returned.
    pub fn finish(mut self) -> (Captured, String) {
        let rest = std::mem::take(&mut self.undecoded);
        let mut last = self.add_text(&String::from_utf8_lossy(&rest));
        for _ in 0..std::mem::take(&mut self.carriage_returns) {
            self.keep('\r');
            last.push('\r');
        }
        let kept = self.head_chars + self.tail.len();
        let cut = self.total_chars - kept;
        let mut text = self.head;
        if cut > 0 {
            text.push_str(&format!("\n[… {cut} characters cut …]\n"));
        }
        text.extend(self.tail);
        let captured = Captured {
            text,
            truncated: cut > 0,
            total_chars: self.total_chars,
        };
        (captured, last)
    }

    fn add_text(&mut self, text: &str) -> String {
        let mut added = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '\r' => self.carriage_returns += 1,
                '\n' => {
                    self.carriage_returns = 0;
                    self.keep('\n');
                    added.push('\n');
                }
                other => {
                    for _ in 0..std::mem::take(&mut self.carriage_returns) {
                        self.keep('\r');
                        added.push('\r');
                    }
                    self.keep(other);
                    added.push(other);
                }
            }
        }
        added
    }

    fn keep(&mut self, c: char) {
        self.total_chars += 1;
        if self.head_chars < self.head_limit {
            self.head.push(c);
            self.head_chars += 1;
        } else {
            self.tail.push_back(c);
            if self.tail.len() > self.tail_limit {
                self.tail.pop_front();
            }
        }
    }
}

/// Live output with a budget, so a command that prints without end cannot flood the event
/// stream; the result still keeps the start and the end.
pub struct LiveOutput<'a> {
    sink: &'a mut (dyn FnMut(&str) + Send),
    left: usize,
    stopped: bool,
}

impl std::fmt::Debug for LiveOutput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveOutput")
            .field("left", &self.left)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

/// Shown once when live output stops at its budget.
pub const LIVE_OUTPUT_STOPPED: &str =
    "\n[live output stops here; the result keeps the start and the end]\n";

impl<'a> LiveOutput<'a> {
    pub fn new(sink: &'a mut (dyn FnMut(&str) + Send), budget_chars: usize) -> Self {
        Self {
            sink,
            left: budget_chars,
            stopped: false,
        }
    }

    pub fn send(&mut self, text: &str) {
        if text.is_empty() || self.stopped {
            return;
        }
        let chars = text.chars().count();
        if chars <= self.left {
            (self.sink)(text);
            self.left -= chars;
            return;
        }
        let part: String = text.chars().take(self.left).collect();
        if !part.is_empty() {
            (self.sink)(&part);
        }
        (self.sink)(LIVE_OUTPUT_STOPPED);
        self.left = 0;
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(limit: usize, reads: &[&[u8]]) -> (Captured, String) {
        let mut capture = Capture::new(limit);
        let mut live = String::new();
        for read in reads {
            live.push_str(&capture.push(read));
        }
        let (captured, last) = capture.finish();
        live.push_str(&last);
        (captured, live)
    }

    #[test]
    fn terminal_line_ends_become_newlines_even_across_reads() {
        let (captured, live) = capture(
            1000,
            &[
                b"one\r\ntwo\r",
                b"\nthree\r\r\n",
                b"50%\r100%\r\n",
                b"end\r",
            ],
        );
        assert_eq!(captured.text, "one\ntwo\nthree\n50%\r100%\nend\r");
        assert_eq!(live, captured.text);
        assert!(!captured.truncated);
        assert_eq!(captured.total_chars, captured.text.chars().count());
    }

    #[test]
    fn utf8_split_between_reads_is_decoded_and_bad_bytes_are_marked() {
        let snowman = "☃".as_bytes();
        let (captured, live) = capture(
            1000,
            &[
                &[b'a', snowman[0]],
                &snowman[1..2],
                &[snowman[2], 0xff, b'b', 0xe2],
            ],
        );
        assert_eq!(captured.text, "a☃\u{fffd}b\u{fffd}");
        assert_eq!(live, captured.text);
    }

    #[test]
    fn long_output_keeps_the_start_and_the_end_and_says_how_much_was_cut() {
        let text: String = (0..100)
            .map(|n| char::from(b'a' + (n % 26) as u8))
            .collect();
        let (captured, live) = capture(10, &[text.as_bytes()]);
        assert!(captured.truncated);
        assert_eq!(captured.total_chars, 100);
        assert_eq!(captured.text, "abcde\n[… 90 characters cut …]\nrstuv");
        // Live output is not cut by the capture.
        assert_eq!(live, text);
        let (exact, _) = capture(100, &[text.as_bytes()]);
        assert!(!exact.truncated);
        assert_eq!(exact.text, text);
    }

    #[test]
    fn live_output_stops_once_at_its_budget() {
        let mut seen = Vec::new();
        let mut sink = |text: &str| seen.push(text.to_owned());
        let mut live = LiveOutput::new(&mut sink, 5);
        live.send("abc");
        live.send("");
        live.send("défg");
        live.send("more");
        assert_eq!(seen, ["abc", "dé", LIVE_OUTPUT_STOPPED]);
    }
}
